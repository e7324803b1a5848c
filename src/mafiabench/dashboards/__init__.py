"""Static dashboards a researcher browses offline: Altair pages generated from the marts, one transcript page per
(linked or sampled) game, Vega scripts bundled locally, publishing gated on the data-quality check."""

from mafiabench.dashboards.render import PublishBlockedError, RenderResult, render_dashboards
from mafiabench.dashboards.transcripts import transcript_path

__all__ = ["PublishBlockedError", "RenderResult", "render_dashboards", "transcript_path"]

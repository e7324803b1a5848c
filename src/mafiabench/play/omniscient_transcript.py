"""A readable, omniscient transcript of a game record for the terminal (private events marked as such)."""

from __future__ import annotations

from mafiabench.record import GameRecord


def format_transcript(record: GameRecord) -> str:
    lines = [f"Game {record.game_id} ({record.variant}, seed {record.seed})"]
    for p in record.players:
        lines.append(f"  seat {p.seat}: {p.name:<10} {p.role:<10} played by {p.agent}")
    for e in record.events:
        if e.type in ("game_start", "role_assigned", "belief"):
            continue
        private = "" if e.visibility == "public" else f"  [{e.visibility}]"
        flags = [f for f in ("format_failure", "random_fallback", "truncated", "tie_break") if getattr(e, f)]
        flag_text = f"  ({', '.join(flags)})" if flags else ""
        if e.type == "phase_start":
            lines.append(f"-- {e.text}")
        elif e.type == "message":
            lines.append(f'{e.actor}: "{e.text}{"..." if e.truncated else ""}"{flag_text}')
        elif e.type == "kill":
            lines.append(f"{e.actor} killed {e.target}{flag_text}{private}")
        elif e.type == "vote":
            verb = "proposes to kill" if e.data.get("kind") == "night_proposal" else "votes for"
            lines.append(f"{e.actor} {verb} {e.target}{flag_text}{private}")
        elif e.type == "game_end":
            winner = e.data.get("winner")
            lines.append(f"== {'no winner' if winner is None else winner + ' wins'}: {e.data.get('reason')}")
        else:
            lines.append(f"{e.text or e.type}{flag_text}{private}")
    if record.error:
        lines.append(f"!! game failed: {record.error.splitlines()[0]}")
    elif record.outcome.get("status") == "abandoned":
        lines.append(f"!! game abandoned: {record.outcome.get('reason')}")
    if record.calls:
        tokens = sum((c.get("input_tokens") or 0) + (c.get("output_tokens") or 0) for c in record.calls)
        lines.append(f"{len(record.calls)} model calls, {tokens} tokens")
    return "\n".join(lines)


def closing_lines(record: GameRecord) -> list[str]:
    """What a person who played (`human/...` seats) is told at the end, instead of the whole transcript they have just
    watched: their fate and the result for their side ("You were Bob, the villager: you were arrested; the mafia wins
    (innocent arrested). You lose."), or why the game stopped, once."""
    if record.error:
        return [f"game failed: {record.error.splitlines()[0]}"]
    if record.outcome.get("status") == "abandoned":
        return [f"game abandoned: {record.outcome.get('reason')}"]
    winner, reason = record.outcome.get("winner"), record.outcome.get("reason")
    result = "no one wins" if winner is None else f"the {winner} wins"
    lines = []
    for p in record.players:
        if not p.agent.startswith("human/"):
            continue
        fate = "you survived"
        for e in record.events:
            if e.type == "kill" and e.target == p.name:
                fate = "you were killed in the night"
            elif e.type == "elimination" and e.target == p.name:
                how = (e.text or "").removeprefix(f"{p.name} was ").split(";")[0].split(".")[0].strip()
                fate = f"you were {how or 'eliminated'}"
        verdict = "" if winner is None else (" You win." if p.team == winner else " You lose.")
        lines.append(f"You were {p.name}, the {p.role}: {fate}; {result}" + (f" ({reason})" if reason else "") +
                     f".{verdict}")
    return lines

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
    (innocent arrested). You lose."), then every player's role and fate, and each day's votes; or why the game
    stopped, once. A role given to `human/...` with several seats (`--villager human/terminal`) makes each a person's
    seat, but the person played only those that were asked something: a villager killed in the first night is not
    theirs (unless they played no seat at all)."""
    if record.error:
        return [f"game failed: {record.error.splitlines()[0]}"]
    if record.outcome.get("status") == "abandoned":
        return [f"game abandoned: {record.outcome.get('reason')}"]
    winner, reason = record.outcome.get("winner"), record.outcome.get("reason")
    result = "no one wins" if winner is None else f"the {winner} wins"
    fates = _fates(record)
    human = [p for p in record.players if p.agent.startswith("human/")]
    acted = {e.actor for e in record.events if e.actor and e.type not in ("role_assigned", "game_start")}
    mine = [p for p in human if p.name in acted] or human
    lines = []
    for p in mine:
        fate = fates[p.name].replace("killed", "you were killed").replace("arrested", "you were arrested")
        fate = fate.replace("eliminated", "you were eliminated").replace("survived", "you survived")
        verdict = "" if winner is None else (" You win." if p.team == winner else " You lose.")
        lines.append(f"You were {p.name}, the {p.role}: {fate}; {result}" + (f" ({reason})" if reason else "") +
                     f".{verdict}")
    you = {p.name for p in mine}
    lines.append("Roles: " + ", ".join(f"{p.name} {p.role} ({'you, ' if p.name in you else ''}{fates[p.name]})"
                                       for p in sorted(record.players, key=lambda q: q.name)))
    lines += _vote_lines(record)
    return lines


def _fates(record: GameRecord) -> dict[str, str]:
    """Each player's end: `killed in night 1`, `arrested on day 1`, `eliminated on day 2`, or `survived`."""
    fates = {p.name: "survived" for p in record.players}
    for e in record.events:
        if e.type in ("kill", "death") and e.target in fates and e.phase == "night":
            fates[e.target] = f"killed in night {e.round}"
        elif e.type == "elimination" and e.target in fates:
            how = (e.text or "").removeprefix(f"{e.target} was ").split(";")[0].split(".")[0].strip()
            fates[e.target] = f"{how or 'eliminated'} on day {e.round}"
    return fates


def _vote_lines(record: GameRecord) -> list[str]:
    """Each day's public votes (`Alice → Bob`), the tally, and who left."""
    lines = []
    days = sorted({e.round for e in record.events if e.type == "vote" and e.phase == "day" and e.round is not None})
    for day in days:
        votes = [e for e in record.events if e.type == "vote" and e.phase == "day" and e.round == day
                 and e.visibility == "public"]
        end = next((e for e in record.events if e.type == "elimination" and e.round == day), None)
        tally = (end.data or {}).get("votes") if end is not None else None
        counted = ""
        if tally:
            ranked = sorted(tally.items(), key=lambda x: (-x[1], x[0]))
            tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
            counted = " (" + ", ".join(f"{n} {k}" for n, k in ranked) + ("; a tie, drawn at random" if tie else "")
            counted += ")"
        gone = f": {end.target} {(end.text or '').removeprefix(f'{end.target} was ').split(';')[0].strip('. ')}" \
            if end is not None else ": no one leaves"
        lines.append(f"Day {day} votes: " + ", ".join(f"{e.actor} → {e.target or 'no one'}" for e in votes)
                     + counted + gone)
    return lines

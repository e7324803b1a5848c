"""The reference's prompt templates in the shape of a published batch_config.json (our own words, the real
shape)."""

from __future__ import annotations

TEMPLATES = {
    "base_prompt": "[INST]\n#CONTEXT:\nA test game of Mafia. Win with your team.\n\n#RULES\nTEST-RULES-PARAGRAPH\n\n"
    "#GAME PLAYERS AND COMPOSITION\n- In the game you're playing there are: {composition}.\n"
    "- You're {name} and the other players are: {other_players}.\n\n\n#YOUR MEMORY:\n{memory}\n\n\n"
    "{action_specific_content}",
    "discussion_suffix": "#DISCUSSION ROUND {round_num}/{discussion_rounds}: \nWhat message do you want to say to "
    "everyone?\nYour response must start with your message in double quotation marks, followed by optional "
    "reasoning:[/INST]\n",
    "voting_suffix": "#VOTING TIME: \nVote to arrest one player from: {candidates}.\nReply with just a name:[/INST]\n",
    "night_action_suffix": "#NIGHT {round_num}: \nChoose a player to {action} from: {candidates}.\n"
    "Reply with just a name:[/INST]\n",
}

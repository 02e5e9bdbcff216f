"""Stage-B prompts: per-mission Chinese system and user messages over the Stage-A summaries.
Pure and deterministic: the same mission and summaries give a byte-identical prompt."""
from __future__ import annotations

from stage_a.missions import Mission
from stage_a.records import image_key

SYSTEM_TEMPLATE = (
    "你是通信基站BBU安装质检审核员，负责按组判定“{mission}”是否合格。"
    "你看不到照片，只能依据每张照片的文字摘要作出判断。\n"
    "检查要点：\n{checkpoints}\n"
    "判定规则：所有检查要点都能从摘要中确认且满足要求时判“通过”；任一要点不满足，"
    "或关键内容无法从摘要中确认时，判“不通过”。摘要里的“备注”与正文矛盾时以备注为准；"
    "标为“无关图片”的照片不作为依据。\n"
    "输出格式（严格两行，不要输出其他内容）：\n"
    "第一行：通过 或 不通过\n"
    "第二行：理由: 简要说明依据，并引用相关照片编号（如 图片_2）"
)
VERDICT_REQUEST = "请给出判定。"
USER_TEMPLATE = "检查任务：{mission}\n本组共{n}张照片，逐张摘要如下：\n{lines}\n" + VERDICT_REQUEST


def system_prompt(mission: Mission) -> str:
    checkpoints = "\n".join(f"{i}. {c}" for i, c in enumerate(mission.checkpoints, start=1))
    return SYSTEM_TEMPLATE.format(mission=mission.name, checkpoints=checkpoints)


def user_prompt(mission: Mission, summaries: list[str], request: str = VERDICT_REQUEST) -> str:
    """The group's summaries, one line per photo, then `request` (the verdict request at inference)."""
    lines = "\n".join(f"{image_key(i)}: {s}" for i, s in enumerate(summaries, start=1))
    prompt = USER_TEMPLATE.format(mission=mission.name, n=len(summaries), lines=lines)
    return prompt[:-len(VERDICT_REQUEST)] + request


def stage_b_messages(mission: Mission, summaries: list[str], request: str = VERDICT_REQUEST) -> list[dict]:
    """System + user messages (text only: Stage-B reasons over summaries, not pixels)."""
    return [{"role": "system", "content": system_prompt(mission)},
            {"role": "user", "content": user_prompt(mission, summaries, request)}]

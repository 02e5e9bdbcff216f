"""Stage-A prompts: one photo in, one Chinese summary line out. Pure (no I/O beyond the registry).

The mission's focus hint comes from configs/missions.yaml; the rest is shared wording, so every
mission's prompt differs only where the mission does.
"""
from __future__ import annotations

from qc_core.missions import Mission

IRRELEVANT_MARKER = "无关图片"

SYSTEM_PROMPT = (
    "你是通信基站BBU安装质检助手。你的任务是把一张现场安装照片概括成一行中文摘要，"
    "供后续按组判定是否合格。只描述照片里确实能看到的内容，不要猜测，不要下结论。"
)

USER_TEMPLATE = (
    "<image>检查任务：{mission}\n"
    "本任务关注：{focus}\n"
    "请用一行中文概括这张照片：依次写出看到的对象、数量和状态，数量写成“对象×N”，"
    "属性层级用“/”分隔，对象之间用“，”分隔；发现问题时在句末写“备注：…”。"
    "不要写坐标，不要换行。如果照片与本任务无关，只输出“{irrelevant}”。"
)


def stage_a_messages(mission: Mission) -> list[dict]:
    """Chat messages for one photo of `mission`; the `<image>` tag binds the photo."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_TEMPLATE.format(
            mission=mission.name, focus=mission.focus, irrelevant=IRRELEVANT_MARKER)},
    ]

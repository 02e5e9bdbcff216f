"""Stage-B prompts: per-mission Chinese system and user messages over the Stage-A summaries.
Pure and deterministic: the same mission and summaries give a byte-identical prompt.

Two modes. Text-only (the default): the model reads the summaries and is told it cannot see the photos.
Photo-aware (`photos=True`, GROUP_QC_STAGE_B_IMAGES=1): each summary line starts with `<image>`, which ms-swift
replaces with that photo's visual tokens (the row's `images` column, in the same order), so each photo sits
right before its own summary; the model is told a summary may miss what its photo shows."""
from __future__ import annotations

from qc_core.missions import Mission
from qc_core.records import image_key

IMAGE_TAG = "<image>"   # ms-swift's placeholder for the next photo of the row's `images`
SEEING = {False: "你看不到照片，只能依据每张照片的文字摘要作出判断。",
          True: "每张照片后附有其文字摘要；请结合照片本身与摘要作出判断，摘要可能遗漏照片中的细节，以照片为准。"}
SYSTEM_TEMPLATE = (
    "你是通信基站BBU安装质检审核员，负责按组判定“{mission}”是否合格。"
    "{seeing}\n"
    "检查要点：\n{checkpoints}\n"
    "判定规则：所有检查要点都能从{evidence}中确认且满足要求时判“通过”；任一要点不满足，"
    "或关键内容无法从{evidence}中确认时，判“不通过”。摘要里的“备注”与正文矛盾时以备注为准；"
    "标为“无关图片”的照片不作为依据。\n"
    "输出格式（严格两行，不要输出其他内容）：\n"
    "第一行：通过 或 不通过\n"
    "第二行：理由: 简要说明依据，并引用相关照片编号（如 图片_2）"
)
VERDICT_REQUEST = "请给出判定。"
USER_TEMPLATE = "检查任务：{mission}\n本组共{n}张照片，{listing}如下：\n{lines}\n" + VERDICT_REQUEST
LISTING = {False: "逐张摘要", True: "逐张给出照片及其摘要"}
EVIDENCE = {False: "摘要", True: "照片或摘要"}


def system_prompt(mission: Mission, photos: bool = False) -> str:
    checkpoints = "\n".join(f"{i}. {c}" for i, c in enumerate(mission.checkpoints, start=1))
    return SYSTEM_TEMPLATE.format(mission=mission.name, checkpoints=checkpoints, seeing=SEEING[photos],
                                  evidence=EVIDENCE[photos])


def user_prompt(mission: Mission, summaries: list[str], request: str = VERDICT_REQUEST, photos: bool = False) -> str:
    """The group's summaries, one line per photo (each after its photo's `<image>` when `photos`), then `request`
    (the verdict request at inference)."""
    tag = IMAGE_TAG if photos else ""
    lines = "\n".join(f"{tag}{image_key(i)}: {s}" for i, s in enumerate(summaries, start=1))
    prompt = USER_TEMPLATE.format(mission=mission.name, n=len(summaries), lines=lines, listing=LISTING[photos])
    return prompt[:-len(VERDICT_REQUEST)] + request


def stage_b_messages(mission: Mission, summaries: list[str], request: str = VERDICT_REQUEST,
                     photos: bool = False) -> list[dict]:
    """System + user messages: over the summaries only, or (`photos`) with an `<image>` per photo."""
    return [{"role": "system", "content": system_prompt(mission, photos)},
            {"role": "user", "content": user_prompt(mission, summaries, request, photos)}]

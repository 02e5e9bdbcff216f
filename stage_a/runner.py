"""Stage-A orchestration: discover -> skip what is done -> prepare photos ahead -> batched
inference -> one JSONL line per finished group.

Photos are decoded, resized and encoded by the engine's template (image processor, tokens) on a few
background threads while the model works on the previous batch, so preparation overlaps compute.
Groups finish in discovery order and each is written, flushed, the moment its last photo is summarised.
"""
from __future__ import annotations

import dataclasses
import errno
import functools
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from qc_core.errors import UserError
from .batching import AUTO, CPU_AUTO_BATCH, GroupBatcher
from .discovery import Group, discover_mission, mission_folders, printable_path, undecodable
from qc_core.checkpoints import BACKENDS, resolve_model, stage_a_fingerprint
from qc_core.images import DEFAULT_MAX_IMAGE_PIXELS, PhotoError, load_photo
from qc_core.jsonl import JsonlAppender, output_lock, write_jsonl_atomic
from qc_core.missions import Mission, is_all, load_registry
from .outputs import MissionOutputs, existing_error_keys, existing_group_ids, shard_from_env, shard_of
from .prompts import stage_a_messages
from qc_core.paths import stored
from qc_core.records import RecordError, error_record, image_key, make_record, normalize_summary

log = logging.getLogger("group_qc.stage_a")

DEFAULT_MAX_PIXELS = 1024 * 28 * 28  # ~1k visual tokens per photo on Qwen2.5-VL
PREPARATION_THREADS = min(4, os.cpu_count() or 1)  # photo preparation threads (PIL and torch release the GIL)


# --compiled_decode: off, or the torch.compile backend of stage_a.compiled_decode (off by default: on the H200 it was
# 0.90-0.96x of the eager decode, docs/gpu/h200_bench_stage_a_compiled_decode.json)
COMPILED_DECODE_CHOICES = ("off", "cudagraphs", "inductor")


@dataclass
class StageAOptions:
    input_dir: str
    output_dir: str
    model: str
    mission: str = "all"
    adapters: tuple = ()
    batch_size: int = 8
    infer_backend: str = "transformers"
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int | None = None
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    num_shards: int | None = None
    shard_index: int | None = None
    overwrite: bool = False
    retry_errors: bool = False
    model_type: str | None = None
    template: str | None = None
    missions_config: str | None = None
    progress: bool = True
    unlabeled: bool = False   # unreviewed groups at <mission>/<group>/, written with label null
    compiled_decode: str = "off"   # or a torch.compile backend of stage_a.compiled_decode.CLI_BACKENDS

    def validate(self) -> None:
        """Out-of-range settings fail here, before any file is touched or model loaded."""
        def check(ok, name, value, rule):
            if not ok:
                raise UserError(f"--{name} {value!r} is out of range: {rule}")
        check(self.batch_size == AUTO or isinstance(self.batch_size, int) and 1 <= self.batch_size <= 4096,
              "batch_size", self.batch_size, "an integer from 1 to 4096, or auto")
        check(self.batch_size != AUTO or self.infer_backend == "transformers", "batch_size", self.batch_size,
              "auto sizes the transformers engine's batches to GPU memory; vLLM schedules its own: give a number")
        check(isinstance(self.max_pixels, int) and 56 * 56 <= self.max_pixels <= 50_000_000, "max_pixels",
              self.max_pixels, "from 3136 (56x56) to 50,000,000")
        check(isinstance(self.max_new_tokens, int) and 1 <= self.max_new_tokens <= 8192, "max_new_tokens",
              self.max_new_tokens, "from 1 to 8192")
        check(0.0 <= float(self.temperature) <= 2.0, "temperature", self.temperature, "from 0 (greedy) to 2")
        check(self.max_image_pixels >= self.max_pixels, "max_image_pixels", self.max_image_pixels,
              "at least --max_pixels")
        check(self.infer_backend in BACKENDS, "infer_backend", self.infer_backend, f"one of {BACKENDS}")
        check(self.compiled_decode in COMPILED_DECODE_CHOICES, "compiled_decode", self.compiled_decode,
              f"one of {', '.join(COMPILED_DECODE_CHOICES)}")
        check(self.compiled_decode == "off" or self.infer_backend == "transformers", "compiled_decode",
              self.compiled_decode, "the transformers engine only (vLLM captures its own CUDA graphs): leave it off")
        n, i = shard_from_env(self.num_shards, self.shard_index)
        check(n >= 1, "num_shards", n, "at least 1")
        check(0 <= i < n, "shard_index", i, f"from 0 to num_shards-1 = {n - 1}")
        check(not (self.overwrite and self.retry_errors), "retry_errors", True, "not together with --overwrite")


@dataclass
class MissionPlan:
    mission: Mission
    outputs: MissionOutputs
    todo: list[Group]
    discovered: int
    skipped_done: int
    skipped_errors: int
    new_issues: list[dict]
    issues: list[str]          # every discovery problem of the mission (all shards, new or already recorded)


@dataclass
class RunReport:
    written: dict = field(default_factory=dict)   # mission -> groups written this run
    failed: dict = field(default_factory=dict)    # mission -> groups sent to the errors file
    skipped: dict = field(default_factory=dict)   # mission -> groups already done or failed before
    photos: int = 0
    truncated: int = 0                            # summaries that hit --max_new_tokens
    seconds: float = 0.0
    model_loaded: bool = False


# Below this much free space a run would fail at its first writes, after minutes of loading the model.
MIN_FREE_BYTES = 16 * 1024 * 1024


def ensure_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise PermissionError(f"output_dir {folder} is not writable ({exc.strerror or exc}); "
                              f"choose another --output_dir or fix its permissions") from None
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"output_dir {folder} has {free / 2**20:.1f} MiB free, less than the "
                                    f"{MIN_FREE_BYTES / 2**20:.0f} MiB a run needs; free space first (the model "
                                    f"is not loaded until there is room)")


def _plan(mission: Mission, folders: list[Path], opts: StageAOptions, registry, outputs: MissionOutputs,
          input_dir: Path) -> MissionPlan:
    if outputs.sharded:
        # Part files of a run with another --num_shards split the groups another way: both runs would write some
        # groups twice and the merge would only find out at the end.
        other = [(total, path) for _, total, path in outputs.part_files() if total != outputs.num_shards]
        if other:
            total, path = other[0]
            raise UserError(f"{mission.name}: {path} is a part of a run with --num_shards {total}, and this "
                             f"run has --num_shards {outputs.num_shards} (stage_a.merge refuses to mix the two): "
                             f"merge that run (group-qc stage-a-merge) if its groups are wanted, remove its part "
                             f"files, then run again")
    groups, issues = discover_mission(input_dir, mission, folders, registry, unlabeled=opts.unlabeled)
    if opts.overwrite:
        # A shard removes its own part only (other shards may be running, holding the mission lock shared; a
        # merge prefers parts over the older merged file). An unsharded run holds the mission lock
        # exclusively, so no other run holds any of the mission's files: it removes them all.
        for path in ([outputs.main, outputs.errors] if outputs.sharded else outputs.every_file()):
            path.unlink(missing_ok=True)
    done = existing_group_ids(outputs.main)   # read (and checked) before the errors file is touched
    if opts.retry_errors:
        write_jsonl_atomic(outputs.errors, [])  # failed groups are retried; issues are re-found below
    failed, known_issues = existing_error_keys(outputs.errors)
    if outputs.sharded and not opts.overwrite:
        done |= existing_group_ids(outputs.merged_main)
        if not opts.retry_errors:
            merged_failed, merged_issues = existing_error_keys(outputs.merged_errors)
            failed |= merged_failed
            known_issues |= merged_issues
    n, i = outputs.num_shards, outputs.shard_index
    mine = [g for g in groups if shard_of(g.group_id, n) == i]
    todo = [g for g in mine if g.group_id not in done and g.group_id not in failed]
    new_issues = [error_record(mission.name, issue.error, group_id=issue.group_id, path=issue.path,
                               stage="discovery")
                  for issue in issues
                  if shard_of(issue.path, n) == i and (issue.path, issue.error) not in known_issues]
    return MissionPlan(mission, outputs, todo, discovered=len(groups),
                       skipped_done=sum(g.group_id in done for g in mine),
                       skipped_errors=sum(g.group_id in failed and g.group_id not in done for g in mine),
                       new_issues=new_issues, issues=[issue.error for issue in issues])


_DONE = object()


def _prefetch(groups: list[Group], input_dir: Path, opts: StageAOptions, prepare, setup, out: queue.Queue,
              stop: threading.Event) -> None:
    """Producer thread: has each group's photos decoded, resized and `prepare`d (the engine's own
    encoding) by a small thread pool and hands whole groups to the consumer in discovery order; a bad
    photo fails its group here.

    Preparing in parallel matters at large batches: the first batch cannot start until all of its
    photos are ready, and ms-swift's bare engine decodes and encodes a batch on up to 32 threads too.
    Measured in one run (group_qc_dev/bench_stage_a.py --all_variants --repeats 3, 2-core CPU, tiny model),
    ours/bare photos/s at batch 1/8/16 with photos encoded ahead: 0.994/1.017/1.033 with four threads,
    0.926/0.953/0.969 with one; with ms-swift encoding inside infer (the CPU default, see
    SwiftSummaryEngine): 0.988/1.053/1.055. Worker processes instead of threads were tried and dropped:
    0.928/0.968/0.972 (process start-up and pickling)."""
    def put(item):
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    # Photos prepared ahead of the consumer: the next batch plus one per worker. This bounds memory,
    # which matters once photos are encoded (pixel_values take ~8x the bytes of the decoded photo).
    lookahead = opts.batch_size + PREPARATION_THREADS

    def load(rel: str):
        return prepare(load_photo(input_dir / rel, max_pixels=opts.max_pixels,
                                  max_image_pixels=opts.max_image_pixels, display_name=rel))

    pool = ThreadPoolExecutor(max_workers=PREPARATION_THREADS, thread_name_prefix="stage-a-prepare", initializer=setup)
    try:
        ahead: deque = deque()  # (group, [future per photo]) in discovery order
        todo = iter(groups)
        photos_ahead = 0
        while not stop.is_set():
            while photos_ahead < lookahead and (group := next(todo, None)) is not None:
                ahead.append((group, [pool.submit(load, rel) for rel in group.images]))
                photos_ahead += len(group.images)
            if not ahead:
                return
            group, futures = ahead.popleft()
            photos_ahead -= len(futures)
            try:
                put((group, [f.result() for f in futures], None))
            except PhotoError as exc:
                put((group, None, str(exc)))
    except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
        put((None, None, exc))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        put(_DONE)


def _preparer(engine, messages):
    """What the prefetch threads do to each loaded photo: the engine's own encoding for this mission's prompt, or
    (any engine with summarize([(messages, image), ...])) the photo paired with the prompt."""
    if hasattr(engine, "prepare"):
        return functools.partial(engine.prepare, messages)

    def prepare(image):
        return messages, image
    return prepare


@dataclass
class _MissionWriter:
    """Where a mission's finished groups go, counted: a record to the main file, a failure to the errors file."""
    name: str
    main: JsonlAppender
    errors: JsonlAppender
    model_name: str
    adapters: tuple
    input_dir: Path
    fingerprint: str | None   # stage_a_fingerprint: None when the checkpoint has none
    written: int = 0
    failed: int = 0

    def fail(self, group: Group, message: str, stage: str) -> None:
        self.errors.write(error_record(self.name, message, group_id=group.group_id, path=group.folder,
                                       stage=stage, label=group.label))
        log.warning("%s: group %s failed: %s", self.name, group.group_id, message)
        self.failed += 1

    def write_finished(self, batcher: GroupBatcher) -> None:
        """Every group whose last photo is summarised: its record, or why there is none."""
        for done in batcher.finished():
            if done.error:
                self.fail(done.group, done.error, "summary")
                continue
            assert done.summaries is not None   # a group without an error has every photo's summary (Finished)
            try:
                # the photo folder relative to the file that names it: a moved or copied project reads its own photos
                record = make_record(done.group, done.summaries, self.model_name, self.adapters,
                                     input_dir=stored(self.input_dir.resolve(), self.main.path.resolve().parent),
                                     model_fingerprint=self.fingerprint)
            except RecordError as exc:
                self.fail(done.group, str(exc), "summary")
                continue
            self.main.write(record)
            self.written += 1


def _fill_batcher(batcher: GroupBatcher, prepared: queue.Queue, writer: _MissionWriter, pbar) -> bool:
    """Takes prepared groups into the batcher until it has enough for a batch; a group with a bad photo fails here.
    Returns True once the producer is done (nothing more will come)."""
    while batcher.wants_more():
        item = prepared.get()
        if item is _DONE:
            return True
        group, photos, err = item
        if isinstance(err, BaseException):
            raise err
        if err is not None:
            writer.fail(group, err, "image")
            pbar.update(len(group.images))
            continue
        batcher.add(group, photos)
    return False


def _summarize_batch(engine, batch: list, batcher: GroupBatcher, report: RunReport) -> None:
    """One engine call for a batch of photos; each photo's summary (or why there is none) goes to its group."""
    results = engine.summarize([slot.photo for slot in batch])
    for slot, result in zip(batch, results):
        if result.error is not None:
            batcher.record(slot, error=f"inference failed on {slot.path}: {result.error}")
            continue
        if result.finish_reason == "length":
            report.truncated += 1
        try:
            batcher.record(slot, summary=normalize_summary(result.text))
        except RecordError as exc:
            batcher.record(slot, error=f"summary of {slot.path} ({image_key(slot.index + 1)}) is "
                                       f"invalid: {exc}")


def _summarize_groups(prepared: queue.Queue, engine, batch_size, writer: _MissionWriter, report: RunReport,
                      pbar) -> None:
    """Batches the prepared groups' photos through the engine and writes each group as soon as it is finished."""
    batcher = GroupBatcher(batch_size)
    exhausted = False
    while True:
        if not exhausted:
            exhausted = _fill_batcher(batcher, prepared, writer, pbar)
        batch = batcher.next_batch()
        if not batch:
            break
        _summarize_batch(engine, batch, batcher, report)
        report.photos += len(batch)
        pbar.update(len(batch))
        writer.write_finished(batcher)


def _run_mission(plan: MissionPlan, engine, opts: StageAOptions, input_dir: Path, model_name: str,
                 report: RunReport, pbar) -> None:
    messages = stage_a_messages(plan.mission)
    name = plan.mission.name
    fingerprint = stage_a_fingerprint(opts.model, opts.adapters)
    setup = getattr(engine, "setup_preparation_thread", None)
    prepare = _preparer(engine, messages)
    prepared: queue.Queue = queue.Queue(maxsize=1)  # groups ready; the lookahead is in _prefetch
    stop = threading.Event()
    producer = threading.Thread(target=_prefetch, args=(plan.todo, input_dir, opts, prepare, setup, prepared, stop),
                                name=f"stage-a-prefetch-{name}", daemon=True)
    with JsonlAppender(plan.outputs.main) as main, JsonlAppender(plan.outputs.errors) as errors:
        for issue in plan.new_issues:
            errors.write(issue)
            log.warning("%s: %s", name, issue["error"])
        writer = _MissionWriter(name, main, errors, model_name, opts.adapters, input_dir, fingerprint)
        producer.start()
        try:
            _summarize_groups(prepared, engine, opts.batch_size, writer, report, pbar)
        finally:
            stop.set()
            producer.join(timeout=5)
    report.written[name] = report.written.get(name, 0) + writer.written
    report.failed[name] = report.failed.get(name, 0) + writer.failed


class NothingReadableError(UserError):
    """Every group of a mission failed discovery: its errors file says why (the run exits 2 after the others)."""


def _nothing_readable(plans: list[MissionPlan], report: RunReport) -> str | None:
    """Why the run must not end as a success: missions where discovery found problems and not one group."""
    lost = [p for p in plans if p.discovered == 0 and p.issues]
    if not lost:
        return None
    others = sum(n for m, n in report.written.items() if m not in {p.mission.name for p in lost})
    return ("; ".join(f"no group of {p.mission.name} could be read: discovery found {len(p.issues)} problem(s) and no "
                      f"group (see {p.outputs.errors}), the first: {p.issues[0]}" for p in lost)
            + f". Fix what they say and rerun the same command ({others} group(s) of other missions written this run)")


def _plan_missions(missions, folders, opts: StageAOptions, registry, input_dir: Path, output_dir: Path,
                   stack: ExitStack, report: RunReport) -> list[MissionPlan]:
    """Each selected mission with photos, locked (the locks held by `stack`) and planned: what is done, what to do.
    A mission without a folder is an error when named, a warning under --mission all."""
    num_shards, shard_index = shard_from_env(opts.num_shards, opts.shard_index)
    plans = []
    for mission in missions:
        if not folders[mission.name]:
            if not is_all(opts.mission):
                raise FileNotFoundError(f"no folder for mission {mission.name!r} under {input_dir} "
                                        f"(looked for: {', '.join(registry.folders_of(mission))})")
            log.warning("no photos for mission %s under %s; nothing to do for it", mission.name, input_dir)
            continue
        outputs = MissionOutputs(output_dir, mission.stage_a_stem, num_shards, shard_index)
        stack.enter_context(output_lock(outputs.mission_lock, shared=outputs.sharded))
        if outputs.sharded:   # two processes never run the same shard
            stack.enter_context(output_lock(outputs.main))
        plan = _plan(mission, folders[mission.name], opts, registry, outputs, input_dir)
        log.info("%s: %d groups discovered; shard %d/%d: %d already written, %d failed before%s, %d to do",
                 mission.name, plan.discovered, shard_index, num_shards, plan.skipped_done, plan.skipped_errors,
                 "" if opts.retry_errors else " (use --retry_errors to retry)", len(plan.todo))
        report.skipped[mission.name] = plan.skipped_done + plan.skipped_errors
        # The output file exists from here on, before the model loads (15-25 s on a 7B): `tail -f` works at once.
        # Appending nothing to an existing file leaves it as it is.
        plan.outputs.main.open("a").close()
        plans.append(plan)
    return plans


def _ready_engine(engine, spec, opts: StageAOptions, plans: list[MissionPlan], total_photos: int,
                  report: RunReport):
    """The engine, built from `spec` only when there are photos to summarise and none was given; --batch_size auto
    resolved and the compiled decode started on it. Returns the engine and the options with the batch size set."""
    if total_photos and engine is None:
        from .engine import SwiftSummaryEngine   # heavy: the ms-swift adapter, only when photos need the model
        engine = SwiftSummaryEngine(spec, backend=opts.infer_backend, batch_size=opts.batch_size,
                                    max_pixels=opts.max_pixels, max_new_tokens=opts.max_new_tokens,
                                    temperature=opts.temperature, seed=opts.seed)
        report.model_loaded = True
    if opts.batch_size == AUTO:   # resolved once the engine is there (a run with nothing to do loads none)
        resolve = getattr(engine, "resolve_batch_size", None)
        batch = resolve(stage_a_messages(plans[0].mission)) if resolve and total_photos else CPU_AUTO_BATCH
        opts = dataclasses.replace(opts, batch_size=batch)
    if opts.compiled_decode != "off" and total_photos:
        engine.start_compiled_decode(opts.compiled_decode, opts.batch_size, stage_a_messages(plans[0].mission))
    return engine, opts


def _run_missions(plans: list[MissionPlan], engine, opts: StageAOptions, input_dir: Path, total_photos: int,
                  report: RunReport) -> None:
    """Every planned mission in turn, under one progress bar over all their photos."""
    from tqdm import tqdm
    with tqdm(total=total_photos, unit="photo", disable=not opts.progress or not total_photos,
              dynamic_ncols=True, desc="stage-a") as pbar:
        for plan in plans:
            pbar.set_postfix_str(plan.mission.name)
            _run_mission(plan, engine, opts, input_dir, opts.model, report, pbar)


def run_stage_a(opts: StageAOptions, engine=None) -> RunReport:
    """Run Stage-A for the selected missions; `engine` (anything with `summarize`) is built from
    opts on first need when not given, so a fully resumed run never loads the model. A mission of which discovery
    could read no group but found problems fails the run (NothingReadableError) once the other missions are done."""
    opts.validate()
    start = time.perf_counter()
    registry = load_registry(opts.missions_config)
    missions = registry.select(opts.mission)
    input_dir, output_dir = Path(opts.input_dir), Path(opts.output_dir)
    if undecodable(str(input_dir.resolve())):   # every record holds it: none could be written
        raise UserError(f"input_dir {printable_path(str(input_dir.resolve()))} has a name that is not valid UTF-8 "
                         f"(bytes shown as \\xNN): rename or link it under a UTF-8 name and pass that")
    folders = mission_folders(input_dir, registry, missions, strict_unknown=is_all(opts.mission))
    spec = resolve_model(opts.model, opts.adapters, opts.model_type, opts.template) if engine is None else None
    ensure_writable(output_dir)
    report = RunReport()
    with ExitStack() as stack:
        plans = _plan_missions(missions, folders, opts, registry, input_dir, output_dir, stack, report)
        total_photos = sum(len(g.images) for p in plans for g in p.todo)
        engine, opts = _ready_engine(engine, spec, opts, plans, total_photos, report)
        _run_missions(plans, engine, opts, input_dir, total_photos, report)
    report.seconds = time.perf_counter() - start
    if report.truncated:
        log.warning("%d summaries stopped at --max_new_tokens %d; raise it if summaries look cut off",
                    report.truncated, opts.max_new_tokens)
    problem = _nothing_readable(plans, report)
    if problem:
        raise NothingReadableError(problem)
    return report

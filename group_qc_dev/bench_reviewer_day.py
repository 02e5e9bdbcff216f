#!/usr/bin/env python
"""A reviewer's day in headless Chromium, measured in one run (a script, not a test; issue 35 item 6).

    python -m group_qc_dev.bench_reviewer_day [--groups 1000] [--screenshot docs/review_day.png] [--json out.json]

Judges --groups synthetic unreviewed groups into verdict files (the judge's verdict records at an uncertified
threshold, so every group goes to review, as a new mission's day does), renders the judge's page (200 cards a page),
then decides every group with one key each, as a reviewer who knows the answer would: reads the current card, presses
p or f. Printed: keystrokes per decision; the page's own work per decision (its keydown handler, from a capturing
listener before it to one after it, performance.now()) and the time from the key to the next frame, median and 95th
percentile; the page loads on the way (the next page after each page's last card); the import of the export. With
--screenshot, the page after half the decisions (mid-day), with a note open.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from stage_b.contract.verdict import label_from_file
from stage_b.judging import day_review
from stage_b.judging import verdict_file

# installed on every page before its scripts: times each keydown's handlers (capture on window: before the page's
# listener on document; bubble on window: after it) and the next animation frame, into sessionStorage
TIMER = """
(function () {
  var t0 = 0;
  function keep(name, value) {
    var all = JSON.parse(sessionStorage.getItem(name) || "[]");
    all.push(value);
    sessionStorage.setItem(name, JSON.stringify(all));
  }
  window.addEventListener("keydown", function () { t0 = performance.now(); }, true);
  window.addEventListener("keydown", function (e) {
    var handled = performance.now() - t0, start = t0;
    keep("bench:handler_ms", handled);
    requestAnimationFrame(function () { keep("bench:frame_ms", performance.now() - start); });
  }, false);
})();
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def day(tmp: Path, groups: int):
    """(the judge's output folder, the truth by (mission, group id)) for a day of `groups` unreviewed groups."""
    from group_qc_dev import synthetic
    from qc_core.jsonl import write_jsonl_atomic
    from stage_b.rules.operating_point import manual_point
    per_label = max(1, groups // 8)
    truth = synthetic.groups_of(synthetic.generate(tmp / "photos", seed=11, groups_per_label=per_label,
                                                   unlabeled=True))
    out = tmp / "day"
    out.mkdir()
    verdicts: dict[str, list[dict]] = {}
    for k, g in enumerate(truth):
        record = {"group_id": g["group_id"], "mission": g["mission"], "label": None, "images": g["images"],
                  "per_image": {f"图片_{i}": s for i, s in enumerate(g["summaries"], start=1)},
                  "input_dir": str(tmp / "photos"), "model": "/models/stage-a"}
        p = 0.9 if g["label"] == "fail" else 0.1
        if k % 10 == 0:   # the model is wrong on a tenth
            p = 1 - p
        verdict = "不通过" if p >= 0.5 else "通过"
        verdicts.setdefault(g["mission"], []).append(verdict_file.verdict_record(
            record, p, manual_point(0.5), f"{verdict}\n理由: 图片_1 依据", {"audit_share": 0.0, "audit_seed": 1}))
    for mission, lines in verdicts.items():
        write_jsonl_atomic(verdict_file.verdicts_path(out, mission), lines)
    day_review.write_day_review(out, sorted(verdicts), [tmp / "photos"])
    return out, {(g["mission"], g["group_id"]): g["label"] for g in truth}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--screenshot", help="the page mid-day, as a PNG")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        print("error: needs chromium and chromedriver (apt-get install -y chromium chromium-driver)", file=sys.stderr)
        return 2
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    with tempfile.TemporaryDirectory(prefix="bench-reviewer-day-") as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        out, truth = day(tmp, args.groups)
        prepared_s = time.perf_counter() - t
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--allow-file-access-from-files"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        try:
            driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TIMER})
            driver.get((out / "review" / "index.html").as_uri())
            driver.execute_script("localStorage.clear(); sessionStorage.clear(); "
                                  "localStorage.setItem('group-qc:reviewer', '王工');")
            driver.refresh()
            total = len(truth)
            keys = loads = 0
            key_s = []
            started = time.perf_counter()
            for n in range(total):
                current = driver.execute_script(
                    "var c = document.querySelector('.card.current'); return c ? [c.dataset.mission, "
                    "c.dataset.groupId, location.href] : null")
                if current is None:
                    break
                mission, group_id, url = current
                key = "f" if truth[(mission, group_id)] == "fail" else "p"
                t = time.perf_counter()
                ActionChains(driver).send_keys(key).perform()
                key_s.append(time.perf_counter() - t)
                keys += 1
                if driver.execute_script("return location.href") != url:   # on to the next page
                    loads += 1
                if args.screenshot and n == total // 2:
                    driver.execute_script("var c = document.querySelector('.card.current');"
                                          "c.querySelector('[data-note-toggle]').click();"
                                          "var t = c.querySelector('textarea.note'); t.value = '接地线端子需复查';"
                                          "t.dispatchEvent(new Event('input')); t.blur();"
                                          "var prev = c.previousElementSibling || c;"
                                          "prev.scrollIntoView({block: 'start'}); window.scrollBy(0, -150);")
                    driver.save_screenshot(args.screenshot)
            wall_s = time.perf_counter() - started
            handler = json.loads(driver.execute_script("return sessionStorage.getItem('bench:handler_ms') || '[]'"))
            frame = json.loads(driver.execute_script("return sessionStorage.getItem('bench:frame_ms') || '[]'"))
            exported = driver.execute_script("return window.groupQcDecisionsJsonl()")
            decided = int(driver.find_element("id", "decided-count").text)
        finally:
            driver.quit()
        (tmp / "decisions.jsonl").write_text(exported, encoding="utf-8")
        from stage_b.labels.decisions import import_decisions
        t = time.perf_counter()
        result = import_decisions([tmp / "decisions.jsonl"], tmp / "labels")
        import_s = time.perf_counter() - t
        wrong = sum(g["status"] != label_from_file(truth[k]) for k, g in result["groups"].items())
    summary = {"groups": total, "decided": decided, "keystrokes": keys,
               "keystrokes_per_decision": keys / max(decided, 1),
               "page_loads": loads, "handler_ms_median": statistics.median(handler),
               "handler_ms_p95": _pct(handler, 0.95), "frame_ms_median": statistics.median(frame),
               "frame_ms_p95": _pct(frame, 0.95), "webdriver_s_per_key_median": statistics.median(key_s),
               "wall_s": wall_s, "prepare_s": prepared_s, "import_s": import_s, "imported": result["added"],
               "labels_wrong": wrong}
    print(f"\nA reviewer's day in headless Chromium: {total} groups on {-(-total // 200)} pages of 200")
    print(f"  decided {decided} with {keys} keystrokes ({summary['keystrokes_per_decision']:.2f} per decision), "
          f"{loads} page loads on the way")
    print(f"  the page's own work per decision (keydown handlers): median {summary['handler_ms_median']:.1f} ms, "
          f"95th percentile {summary['handler_ms_p95']:.1f} ms")
    print(f"  key to the next frame: median {summary['frame_ms_median']:.1f} ms, 95th percentile "
          f"{summary['frame_ms_p95']:.1f} ms (a reviewer at 300 groups an hour spends 12,000 ms per group)")
    print(f"  WebDriver round trip per key (not the page's): median "
          f"{1000 * summary['webdriver_s_per_key_median']:.0f} ms;"
          f" the whole run {wall_s:.0f} s")
    print(f"  export -> import: {result['added']} decisions in {import_s:.2f} s, {wrong} labels unlike the truth")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Screenshots of the review app's pages for the docs, taken in headless Chromium on a project the demo made.

    python -m group_qc_dev.app_screens --project demo_out --accounts demo_out/accounts.json --out docs/review_app

Starts `group-qc serve` on the project, signs in as each person (the accounts file the demo wrote: {name:
password}), and saves login.png, review.png (reviewer-a's queue of the day given by --day), lead.png, owner.png
and, when the owner still has a one-time password, password.png.
Look at every picture it makes."""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from pathlib import Path

from group_qc_dev.review_load import start_server


def chromium(width: int = 1400, height: int = 1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}", "--disable-background-networking", "--no-first-run"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                            options=options)


def sign_in(driver, base: str, name: str, accounts: Path, next_page: str, shot: Path | None = None) -> None:
    """Signs in as `name`; a one-time password is replaced on the password page as a person would (the new one
    written back to the accounts file), with a screenshot of that page when `shot` names one."""
    import secrets

    from selenium.webdriver.support.ui import WebDriverWait
    known = json.loads(accounts.read_text(encoding="utf-8"))
    driver.get(f"{base}/login?next={next_page.replace('&', '%26')}")
    WebDriverWait(driver, 20).until(lambda d: d.find_elements("id", "name"))
    driver.find_element("id", "name").send_keys(name)
    driver.find_element("id", "password").send_keys(known[name])
    driver.find_element("id", "sign-in").click()
    WebDriverWait(driver, 20).until(lambda d: "/login" not in d.current_url)
    if "/password" in driver.current_url:
        WebDriverWait(driver, 20).until(lambda d: d.find_elements("id", "old"))
        new = secrets.token_urlsafe(18)
        driver.find_element("id", "old").send_keys(known[name])
        driver.find_element("id", "new").send_keys(new)
        driver.find_element("id", "again").send_keys(new)
        if shot is not None:
            driver.save_screenshot(str(shot))
        driver.find_element("id", "save-password").click()
        WebDriverWait(driver, 20).until(lambda d: "/password" not in d.current_url)
        known[name] = new
        accounts.write_text(json.dumps(known, ensure_ascii=False), encoding="utf-8")


def settle(driver, seconds: float = 2.5) -> None:
    """Until the page's requests are answered (the pages draw as their API answers arrive)."""
    time.sleep(seconds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--project", required=True)
    p.add_argument("--accounts", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--day", default="days/day4")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    accounts = Path(args.accounts)
    proc, base = start_server(Path(args.project))
    driver = chromium()
    try:
        driver.get(f"{base}/login")
        settle(driver, 1)
        driver.save_screenshot(str(out / "login.png"))
        sign_in(driver, base, "reviewer-a", accounts, f"/review?day={args.day}")
        settle(driver)
        driver.save_screenshot(str(out / "review.png"))
        for name, page, height in (("lead", "/lead", 1500), ("owner", "/owner", 2200)):
            driver.delete_all_cookies()
            driver.set_window_size(1400, height)
            sign_in(driver, base, name, accounts, page, out / "password.png" if name == "owner" else None)
            settle(driver, 4)
            driver.save_screenshot(str(out / f"{page.strip('/')}.png"))
    finally:
        driver.quit()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    print(f"wrote {', '.join(sorted(x.name for x in out.glob('*.png')))} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

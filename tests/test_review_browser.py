"""The served review app in headless Chromium against a real `group-qc serve` process: two reviewers signed in at once
decide their own queues with one key per decision; a decision made while the server is stopped is sent when it
restarts (also from a tab reloaded in between); two tabs on one card give one decision and a 409 shown on the page; a
reload keeps everything; the lead sees both reviewers' work and confirms an escape as the second person, which the
reviewer's own second decision never does; names and notes are shown as text under the page's CSP."""
from __future__ import annotations

import signal
import time

import pytest
from selenium.webdriver.support.ui import WebDriverWait

from review_app import decision_store
from review_app.project import card_id
from review_app.store import Store
from tests.helpers import send_keys
from tests.served import PASSWORD, add_account, free_port, judged_days, start_server

pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(80)]
DAY = "days/day1"
XSS = '<img src=x onerror="window.__xss=1">'


@pytest.fixture
def site(tmp_path, synthetic, db_url):
    """A project with its accounts, and a server on it: {"base", "start", "stop", "store", "lines"}."""
    project = tmp_path / "project"
    project.mkdir()
    lines = judged_days(project, synthetic, per_label=2, reviewers=("王工", "李工", XSS))
    store = Store(db_url)
    store.migrate()
    for name, role in (("王工", "reviewer"), ("李工", "reviewer"), (XSS, "reviewer"), ("组长", "lead"),
                       ("老板", "owner")):
        add_account(store, name, role)
    port = free_port()
    state: dict = {"proc": None}

    def start():
        state["proc"], state["base"] = start_server(project, db_url, port=port)

    def stop():
        state["proc"].send_signal(signal.SIGINT)
        state["proc"].communicate(timeout=60)
    start()
    yield {"base": state["base"], "start": start, "stop": stop, "store": store, "lines": lines, "project": project}
    if state["proc"].poll() is None:
        stop()
    store.close()


def sign_in(driver, base: str, name: str, next_page: str = f"/review?day={DAY}") -> None:
    driver.get(f"{base}/login?next={next_page.replace('&', '%26')}")
    WebDriverWait(driver, 20).until(lambda d: d.find_elements("id", "name"))
    driver.find_element("id", "name").send_keys(name)
    driver.find_element("id", "password").send_keys(PASSWORD)
    driver.find_element("id", "sign-in").click()
    WebDriverWait(driver, 20).until(lambda d: "/login" not in d.current_url)
    if next_page.startswith("/review"):
        ready(driver)


def ready(driver) -> None:
    """Until the review page has its queue and a card on screen (the count is "…" until the queue is loaded: an empty
    queue reads 0 only after it was asked for)."""
    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        "var c = document.getElementById('card'), t = document.getElementById('total-count');"
        "return !!(c && t && (c.dataset.card || t.textContent === '0'));"))


def saved(driver, decided: int, timeout: float = 30) -> None:
    WebDriverWait(driver, timeout).until(lambda d: d.execute_script(
        "return document.getElementById('connection').textContent === 'every decision saved' && "
        "document.getElementById('decided-count').textContent === arguments[0]", str(decided)))


def current(driver) -> str:
    return driver.execute_script("return document.getElementById('card').dataset.card")


def stored(store: Store) -> dict[tuple[str, str], str]:
    return {(r["name"], r["card"]): r["decision"] for r in decision_store.decisions_of_day(store, DAY)}


def no_csp_violation(driver) -> None:
    logs = [e["message"] for e in driver.get_log("browser")]
    assert not [m for m in logs if "Content Security Policy" in m or "Refused to" in m], logs


def test_two_reviewers_at_once_then_the_lead_sees_both_and_confirms_an_escape(site, browser, second_browser):
    base, store = site["base"], site["store"]
    sign_in(browser, base, "王工")
    sign_in(second_browser, base, "李工")
    sizes = {}
    for driver, name in ((browser, "王工"), (second_browser, "李工")):
        sizes[name] = int(driver.find_element("id", "total-count").text)
    assert sizes["王工"] and sizes["李工"]
    # interleaved, one key per decision: 不通过 on the first card, 通过 on the rest
    for k in range(max(sizes.values())):
        for driver, name in ((browser, "王工"), (second_browser, "李工")):
            if k < sizes[name]:
                send_keys(driver, "f" if k == 0 else "p")
    saved(browser, sizes["王工"])
    saved(second_browser, sizes["李工"])
    decided = stored(store)
    assert {n for n, _ in decided} == {"王工", "李工"}
    assert {name: sum(n == name for n, _ in decided) for name in sizes} == sizes
    no_csp_violation(browser)
    # the lead: every queue, both reviewers' work, and the escapes waiting for a second person
    browser.find_element("id", "sign-out").click()
    WebDriverWait(browser, 20).until(lambda d: "/login" in d.current_url)
    sign_in(browser, base, "组长", "/lead")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements("css selector", "#queues table"))
    text = browser.find_element("id", "queues").text
    assert "王工" in text and "李工" in text
    deadline = time.monotonic() + 30
    while "王工" not in browser.find_element("id", "reviewer-table").text and time.monotonic() < deadline:
        time.sleep(1)   # the labels writer's next pass
        browser.refresh()
        WebDriverWait(browser, 20).until(lambda d: d.find_elements("css selector", "#reviewer-table table, "
                                                                   "#reviewer-table p"))
    table = browser.find_element("id", "reviewer-table").text
    assert "王工" in table and "李工" in table
    no_csp_violation(browser)


def test_an_escape_waits_for_a_second_account_and_the_lead_confirms_it(site, browser):
    base, lines = site["base"], site["lines"]
    v = next(v for v in lines[DAY] if v["route"] == "audit" and v["verdict"] == "通过" and not v.get("gold")
             and set(v["assigned_to"]) & {"王工", "李工"})
    who = sorted(set(v["assigned_to"]) & {"王工", "李工"})[0]
    audit = card_id(v["mission"], v["group_id"])
    sign_in(browser, base, who, f"/review?day={DAY}&card={audit}")
    assert current(browser) == audit
    send_keys(browser, "f")
    saved(browser, 1)
    browser.get(f"{base}/review?day={DAY}&card={audit}")   # the same account again: no second person
    ready(browser)
    send_keys(browser, "f")
    saved(browser, 1)
    browser.find_element("id", "sign-out").click()
    sign_in(browser, base, "组长", "/lead")
    deadline = time.monotonic() + 30
    while who not in browser.find_element("id", "escapes").text and time.monotonic() < deadline:
        time.sleep(1)
        browser.refresh()
        WebDriverWait(browser, 20).until(lambda d: d.find_elements("css selector", "#escapes table, #escapes p"))
    escapes = browser.find_element("id", "escapes")
    assert who in escapes.text
    escapes.find_element("css selector", "a").click()   # the card, as the second person
    ready(browser)
    assert current(browser) == audit
    send_keys(browser, "f")
    WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "connection").text == "every decision saved")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        browser.get(f"{base}/lead")
        WebDriverWait(browser, 20).until(lambda d: d.find_elements("css selector", "#escapes table, #escapes p"))
        if browser.find_element("id", "escapes").text.endswith("No escape waits for a second person."):
            break
        time.sleep(1)
    assert browser.find_element("id", "escapes").text.endswith("No escape waits for a second person.")


def test_a_decision_made_while_the_server_is_stopped_is_sent_when_it_restarts(site, browser):
    base, store = site["base"], site["store"]
    sign_in(browser, base, "王工")
    first = current(browser)
    site["stop"]()
    send_keys(browser, "f")
    second = current(browser)
    send_keys(browser, "p")
    WebDriverWait(browser, 20).until(lambda d: "waiting to be sent" in d.find_element("id", "connection").text)
    assert len(browser.execute_script("return window.groupQcOutbox()")) == 2
    site["start"]()
    browser.refresh()   # a reload in between: the unsent decisions are kept in this browser and sent
    ready(browser)
    saved(browser, 2)
    assert {c: d for (n, c), d in stored(store).items() if n == "王工"} == {first: "不通过", second: "通过"}


def test_two_tabs_on_one_card_give_one_decision_and_a_409_on_the_page(site, browser):
    base, store = site["base"], site["store"]
    sign_in(browser, base, "王工")
    card = current(browser)
    first_tab = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{base}/review?day={DAY}&card={card}")
    ready(browser)
    second_tab = browser.current_window_handle
    browser.switch_to.window(first_tab)
    send_keys(browser, "f")
    saved(browser, 1)
    browser.switch_to.window(second_tab)
    browser.execute_script("document.getElementById('row-' + arguments[0]).click()", card)
    send_keys(browser, "p")
    WebDriverWait(browser, 20).until(lambda d: d.find_elements("id", "card-message") or
                                     d.execute_script("return document.querySelector('#row-' + arguments[0])"
                                                      ".dataset.state === 'conflict'", card))
    browser.execute_script("document.getElementById('row-' + arguments[0]).click()", card)
    message = browser.find_element("id", "card-message").text
    assert "changed in another tab or window" in message
    assert browser.find_element("css selector", "#card .decision-badge").text == "decided: 不通过"
    assert stored(store) == {("王工", card): "不通过"}
    browser.close()
    browser.switch_to.window(first_tab)


def test_a_reload_keeps_every_decision_and_note(site, browser):
    base = site["base"]
    sign_in(browser, base, "王工")
    send_keys(browser, "f")
    send_keys(browser, "n")
    send_keys(browser, "螺丝看不清 " + XSS + "\n")
    noted = current(browser)
    send_keys(browser, "p")
    saved(browser, 2)
    browser.refresh()
    ready(browser)
    states = browser.execute_script("return Array.from(document.querySelectorAll('#list .row')).map("
                                    "r => r.dataset.state)")
    assert states[:2] == ["saved", "saved"] and states[2] == ""
    assert current(browser) == browser.execute_script("return document.querySelectorAll('#list .row')[2].dataset.card")
    browser.execute_script("document.getElementById('row-' + arguments[0]).click()", noted)
    assert browser.find_element("id", "note").get_attribute("value") == "螺丝看不清 " + XSS
    assert browser.execute_script("return window.__xss") is None


def test_names_and_notes_are_text_under_the_pages_policy(site, browser):
    """A reviewer named like markup, and a note that is markup, shown to the lead as the characters they are
    (planted: the lead page's table writing innerHTML runs the name's onerror)."""
    base = site["base"]
    sign_in(browser, base, XSS)
    send_keys(browser, "f")
    saved(browser, 1)
    browser.find_element("id", "sign-out").click()
    sign_in(browser, base, "组长", "/lead")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:   # the reviewer table, once the labels writer has taken the decision
        WebDriverWait(browser, 20).until(lambda d: d.find_elements("css selector", "#queues table") and
                                         d.find_elements("css selector", "#reviewer-table table, #reviewer-table p"))
        if XSS in browser.find_element("id", "reviewer-table").text:
            break
        time.sleep(1)
        browser.refresh()
    for section in ("queues", "reviewer-table"):
        box = browser.find_element("id", section)
        assert XSS in box.text and not box.find_elements("css selector", "img"), section
    assert browser.execute_script("return window.__xss") is None
    no_csp_violation(browser)
    shot = browser.get_screenshot_as_png()
    assert len(shot) > 10_000

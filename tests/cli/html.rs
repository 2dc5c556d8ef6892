//! `trace-summarize --plot FILE.html` in a real browser: headless Chromium
//! loads the page, runs its script, and the test reads the DOM it leaves
//! (`--dump-dom`) and its console log (`--enable-logging=stderr`).
//!
//! Skipped, with a note, where no Chromium is installed, unless
//! `TRACEKIT_REQUIRE_BROWSER` is set (CI sets it after installing one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{Cmd, TestDir, data};

/// A Chromium to run: `$TRACEKIT_CHROMIUM`, or the first of Debian's,
/// Ubuntu's and Google's names on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TRACEKIT_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

fn browser_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("TRACEKIT_REQUIRE_BROWSER").is_none(),
            "TRACEKIT_REQUIRE_BROWSER is set but no chromium was found (install Debian's chromium, or set TRACEKIT_CHROMIUM)"
        );
        eprintln!("skipped: no chromium on the PATH to render the --plot page in");
    }
    found
}

/// The browser and a fresh directory `name` holding copies of results
/// files (name, file under tests/data/); None when the test is skipped.
fn browser_and_dir(name: &str, copies: &[(&str, &str)]) -> Option<(PathBuf, TestDir)> {
    let browser = browser_or_skip()?;
    let dir = TestDir::new(name);
    for (to, from) in copies {
        dir.copy_data(to, from);
    }
    Some((browser, dir))
}

/// What the browser left: the DOM after the page's script ran, and the
/// console messages it logged.
struct Rendered {
    dom: String,
    console: Vec<String>,
}

/// Load `page` in headless Chromium, killed after 60 s.
fn render(browser: &Path, dir: &TestDir, page: &Path) -> Rendered {
    let profile = dir.join("chromium-profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    let (out, err) = crate::util::drain(&mut child);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {} in 60 s", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = out.join().unwrap();
    let stderr = err.join().unwrap();
    assert!(status.success(), "chromium: {status}\n{stderr}");
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Rendered { dom, console }
}

impl Rendered {
    /// The page drew every panel and reported no error, on the page or on
    /// the console.
    #[track_caller]
    fn assert_clean(&self) {
        assert!(self.console.is_empty(), "console: {:#?}", self.console);
        assert!(
            self.dom.contains("<ul id=\"errors\" hidden=\"\"></ul>"),
            "the page reported errors: {}",
            self.dom
        );
        assert!(self.dom.contains("data-drawn=\"ok\""), "{}", self.dom);
    }

    /// Each series the script drew: (name, points in the data).
    fn series(&self) -> Vec<(String, usize)> {
        self.dom
            .split("class=\"series\" data-name=\"")
            .skip(1)
            .map(|rest| {
                let (name, rest) = rest.split_once('"').unwrap();
                let points = rest
                    .split_once("data-points=\"")
                    .and_then(|(_, r)| r.split_once('"'))
                    .unwrap()
                    .0;
                (name.to_string(), points.parse().unwrap())
            })
            .collect()
    }

    /// The SLO lines drawn, by label.
    fn slo_lines(&self) -> Vec<String> {
        self.dom
            .split("class=\"slo\" data-label=\"")
            .skip(1)
            .map(|rest| rest.split_once('"').unwrap().0.to_string())
            .collect()
    }

    /// The cells of the first table row whose first cell is `first`.
    fn row(&self, first: &str) -> Vec<String> {
        let start = format!("<tr><td>{first}</td>");
        let (_, rest) = self
            .dom
            .split_once(&start)
            .unwrap_or_else(|| panic!("no row {first}"));
        let row = rest.split_once("</tr>").unwrap().0;
        let mut cells = vec![first.to_string()];
        cells.extend(
            row.split("</td>")
                .filter_map(|c| c.split_once('>').map(|(_, text)| text.to_string())),
        );
        cells
    }
}

/// A scrape file of vLLM's gauges and prefix-cache counters, 1 s apart.
const SCRAPES: &str = concat!(
    r#"{"t_ms":0,"samples":{"vllm:num_requests_running":1,"vllm:num_requests_waiting":0,"vllm:kv_cache_usage_perc":0.1,"vllm:prefix_cache_queries_total":0,"vllm:prefix_cache_hits_total":0}}"#,
    "\n",
    r#"{"t_ms":1000,"samples":{"vllm:num_requests_running":2,"vllm:num_requests_waiting":1,"vllm:kv_cache_usage_perc":0.3,"vllm:prefix_cache_queries_total":200,"vllm:prefix_cache_hits_total":50}}"#,
    "\n",
    r#"{"t_ms":2000,"samples":{"vllm:num_requests_running":0,"vllm:num_requests_waiting":0,"vllm:kv_cache_usage_perc":0.2,"vllm:prefix_cache_queries_total":400,"vllm:prefix_cache_hits_total":150}}"#,
    "\n",
);

/// `tests/data/results/streamed.ndjson` (worked out in summarize.rs): two
/// ok answers sent at 0 and 0.5 s ending at 3.5 and 4.85 s, one with a
/// TTFT (700 ms), and an error sent at 6.2 s.
#[test]
fn the_page_loads_clean_and_shows_the_reports_figures() {
    let Some((browser, dir)) =
        browser_and_dir("html-page", &[("run.ndjson", "results/streamed.ndjson")])
    else {
        return;
    };
    dir.write("scrapes.ndjson", SCRAPES);
    let flags = [
        "--slo",
        "ttft=500ms,e2e=4s",
        "--metrics",
        "scrapes.ndjson",
        "run.ndjson",
    ];
    dir.cmd("trace-summarize")
        .args(["--plot", "run.html", "-o", "summary.txt"])
        .args(flags)
        .run()
        .ok();
    let report = dir
        .cmd("trace-summarize")
        .args(["--format", "json"])
        .args(flags)
        .run();
    report.ok();
    let j = report.json();
    let page = render(&browser, &dir, &dir.join("run.html"));
    page.assert_clean();

    // The table's figures are the JSON report's, as the text table rounds
    // them (3 places for rates, 2 for latencies).
    let num = |v: &Value, places: i32| {
        let scale = 10f64.powi(places);
        ((v.as_f64().unwrap() * scale).round() / scale).to_string()
    };
    assert_eq!(
        page.row("request throughput")[1],
        format!("{} requests/s", num(&j["throughput"]["requests_per_s"], 3))
    );
    assert_eq!(
        page.row("duration")[1],
        format!("{} s", num(&j["duration_s"], 3))
    );
    for (row, key) in [("TTFT", "ttft"), ("E2E", "e2e"), ("TPOT", "tpot")] {
        let cells = page.row(row);
        let f = &j[key];
        assert_eq!(cells[1], f["count"].to_string(), "{row}");
        for (cell, figure) in cells[2..]
            .iter()
            .zip(["mean", "std", "min", "p50", "p90", "p95", "p99", "max"])
        {
            assert_eq!(*cell, num(&f[figure], 2), "{row} {figure}");
        }
    }
    assert_eq!(page.row("TTFT")[2], "700");
    assert_eq!(page.row("E2E")[2], "3925");
    // The server's tables are there too, under their heading.
    assert!(
        page.dom.contains("<h3>server (3 scrapes)</h3>"),
        "{}",
        page.dom
    );
    assert!(
        page.dom.contains("vllm:num_requests_running"),
        "{}",
        page.dom
    );

    // The series, worked out by hand: TTFT of one answer; E2E of two; one
    // error; the axis ends at 6.2 s, so 7 one-second buckets in flight and
    // of tokens/s; percentile curves at x = 1, 1.1, 1.21, … up to the
    // count, then the maximum (TTFT: 1 and the end; E2E: 1 … 1.1^7 and
    // the end); the scrapes: 3 points each, the hit rate 2 (one per
    // interval: 25 % then 50 %).
    assert_eq!(
        page.series(),
        [
            ("run.ndjson TTFT", 1),
            ("run.ndjson E2E", 2),
            ("run.ndjson errors", 1),
            ("run.ndjson", 7),
            ("run.ndjson", 7),
            ("server running", 3),
            ("server waiting", 3),
            ("server KV-cache usage", 3),
            ("server prefix-cache hit rate", 2),
            ("run.ndjson TTFT", 2),
            ("run.ndjson E2E", 9),
        ]
        .map(|(n, c)| (n.to_string(), c))
    );
    // The SLO bounds cross both latency panels.
    assert_eq!(
        page.slo_lines(),
        [
            "SLO ttft 500 ms",
            "SLO e2e 4000 ms",
            "SLO ttft 500 ms",
            "SLO e2e 4000 ms"
        ]
    );
    // The run's flags and inputs.
    assert!(
        page.dom
            .contains("--slo ttft=500ms,e2e=4s --metrics scrapes.ndjson run.ndjson</code>"),
        "{}",
        page.dom
    );
    assert!(page.dom.contains("<dt>convention</dt><dd>tracekit</dd>"));
}

#[test]
fn compared_runs_are_overlaid_on_the_page() {
    let Some((browser, dir)) = browser_and_dir(
        "html-compare",
        &[
            ("a.ndjson", "results/streamed.ndjson"),
            ("b.ndjson", "results/small.ndjson"),
        ],
    ) else {
        return;
    };
    dir.cmd("trace-summarize")
        .args(["--compare", "--plot", "c.html", "-o", "c.txt"])
        .args(["a.ndjson", "b.ndjson"])
        .run()
        .code(0);
    let page = render(&browser, &dir, &dir.join("c.html"));
    page.assert_clean();
    let names: Vec<String> = page.series().into_iter().map(|s| s.0).collect();
    assert_eq!(names.iter().filter(|n| *n == "a.ndjson TTFT").count(), 2);
    assert_eq!(names.iter().filter(|n| *n == "b.ndjson TTFT").count(), 2);
    // The comparison's table: one column per setup, and the difference.
    assert_eq!(
        page.row("requests.total"),
        ["requests.total", "3", "6", "+3 (+100%)"]
    );
}

/// A file name is text on the page, never markup or script.
#[test]
fn a_file_name_cannot_inject_markup_or_script() {
    let dir = TestDir::new("html-injection");
    // `/` cannot be in a file name: the name spans two directories.
    std::fs::create_dir_all(dir.join("x</script><script>alert(1)<")).unwrap();
    let name = "x</script><script>alert(1)</script>.ndjson";
    dir.copy_data(name, "results/small.ndjson");
    dir.run(
        "trace-summarize",
        &["--plot", "p.html", "-o", "s.txt", name],
    )
    .ok();
    let html = String::from_utf8(dir.read("p.html")).unwrap();
    assert!(!html.contains("<script>alert"), "{html}");
    assert_eq!(html.matches("<script").count(), 2, "{html}");
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let page = render(&browser, &dir, &dir.join("p.html"));
    page.assert_clean();
    assert_eq!(page.dom.matches("<script").count(), 2, "{}", page.dom);
    let escaped = "x&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;.ndjson";
    assert!(
        page.dom
            .contains(&format!("<h1>trace-summarize: {escaped}</h1>")),
        "{}",
        page.dom
    );
    // The legend shows the name's end as text.
    assert!(
        page.dom
            .contains("\u{2026}ipt&gt;alert(1)&lt;/script&gt;.ndjson TTFT</text>"),
        "{}",
        page.dom
    );
    // A model name (a --by group) is text too.
    let model = "</script><img src=x onerror=alert(2)>";
    let results: String = String::from_utf8(std::fs::read(data("results/small.ndjson")).unwrap())
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["model"] = Value::from(model);
            v.to_string() + "\n"
        })
        .collect();
    dir.write("models.ndjson", results);
    dir.run(
        "trace-summarize",
        &[
            "--by",
            "model",
            "--plot",
            "m.html",
            "-o",
            "m.txt",
            "models.ndjson",
        ],
    )
    .ok();
    let html = String::from_utf8(dir.read("m.html")).unwrap();
    assert!(!html.contains("<img"), "{html}");
    let page = render(&browser, &dir, &dir.join("m.html"));
    page.assert_clean();
    assert!(!page.dom.contains("<img"), "{}", page.dom);
    assert!(
        page.dom
            .contains("<h3>model = &lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;: "),
        "{}",
        page.dom
    );
    // Standard input is named "run" and the page still loads.
    let run = Cmd::new("trace-summarize")
        .arg("--plot")
        .arg(dir.join("stdin.html"))
        .stdin(std::fs::read(data("results/small.ndjson")).unwrap())
        .run();
    run.ok();
    render(&browser, &dir, &dir.join("stdin.html")).assert_clean();
}

/// Events a person would send, dispatched by a script added to the page:
/// hover a point of the in-flight panel, drag across 1 to 3 s, turn the
/// wheel once, press Reset zoom. The script writes what the page showed
/// into `<pre id="check">`.
const GESTURES: &str = r##"<script>
(function () {
  const out = [];
  const flight = document.querySelectorAll("#panels svg")[1];
  const at = (x, y) => {
    const r = flight.getBoundingClientRect();
    return { clientX: r.left + (x * r.width) / 1200, clientY: r.top + (y * r.height) / 300, bubbles: true, cancelable: true };
  };
  const points = () => flight.querySelector(".series path").getAttribute("d").slice(1).split("L").map((p) => p.split(",").map(Number));
  const range = () => document.getElementById("range").textContent;
  const p = points();
  out.push("points " + p.length);
  flight.dispatchEvent(new MouseEvent("mousemove", at(p[2][0], p[2][1])));
  out.push("tip " + document.getElementById("tip").textContent.replace("\n", " | "));
  flight.dispatchEvent(new MouseEvent("mousedown", Object.assign(at(p[1][0], 150), { button: 0 })));
  flight.dispatchEvent(new MouseEvent("mousemove", at(p[3][0], 150)));
  window.dispatchEvent(new MouseEvent("mouseup", at(p[3][0], 150)));
  out.push(range());
  out.push("points " + points().length);
  // The middle of the data area (x 70 to 930): 2 s in the view 1 to 3 s.
  flight.dispatchEvent(new WheelEvent("wheel", Object.assign(at(500, 150), { deltaY: 100 })));
  out.push(range());
  document.getElementById("reset").click();
  out.push(range());
  const pre = document.createElement("pre");
  pre.id = "check";
  pre.textContent = out.join("\n");
  document.body.appendChild(pre);
})();
</script>
"##;

/// Hover and zoom, in the browser. Requests in flight of streamed.ndjson
/// (sent 0 and 0.5 s, ending 3.5 and 4.85 s): 2 in the bucket at 2 s.
#[test]
fn hovering_shows_values_and_the_time_axis_zooms() {
    let Some((browser, dir)) = browser_and_dir(
        "html-gestures",
        &[("run.ndjson", "results/streamed.ndjson")],
    ) else {
        return;
    };
    dir.run(
        "trace-summarize",
        &["--plot", "run.html", "-o", "s.txt", "run.ndjson"],
    )
    .ok();
    let page = String::from_utf8(dir.read("run.html")).unwrap();
    dir.write(
        "gestures.html",
        page.replace("</body>", &format!("{GESTURES}</body>")),
    );
    let r = render(&browser, &dir, &dir.join("gestures.html"));
    r.assert_clean();
    let check = r
        .dom
        .split_once("<pre id=\"check\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .unwrap_or_else(|| panic!("{}", r.dom))
        .0;
    let lines: Vec<&str> = check.lines().collect();
    assert_eq!(lines[0], "points 7");
    assert_eq!(lines[1], "tip run.ndjson | at 2 s: 2 requests");
    // A range of times read back from "time axis: A to B s".
    let range = |line: &str| -> (f64, f64) {
        let (a, b) = line
            .strip_prefix("time axis: ")
            .and_then(|l| l.strip_suffix(" s"))
            .and_then(|l| l.split_once(" to "))
            .unwrap_or_else(|| panic!("{line}"));
        (a.parse().unwrap(), b.parse().unwrap())
    };
    // Pointer positions are whole pixels: a pixel is 6.2 s / 860 wide.
    let near = |got: (f64, f64), want: (f64, f64)| {
        assert!(
            (got.0 - want.0).abs() < 0.02 && (got.1 - want.1).abs() < 0.02,
            "{got:?}, want {want:?}"
        );
    };
    near(range(lines[2]), (1.0, 3.0));
    // Fewer points in view after the zoom (one kept beyond each edge).
    let shown: usize = lines[3].strip_prefix("points ").unwrap().parse().unwrap();
    assert!((4..=5).contains(&shown), "{shown}");
    // The wheel widens the view by 1.25 around the pointer (at 2 s).
    near(range(lines[4]), (0.75, 3.25));
    assert_eq!(lines[5], "time axis: 0 to 6.2 s");
}

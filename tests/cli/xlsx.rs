//! `trace-summarize --format xlsx`, read back with a spreadsheet reader:
//! every sheet, header and number, on `tests/data/results/conventions.ndjson`
//! (the table of requests is in conventions.rs).

use calamine::{Data, Reader, Xlsx, open_workbook};

use crate::util::{Cmd, TestDir, data, run_file};

fn sheet(book: &mut Xlsx<std::io::BufReader<std::fs::File>>, name: &str) -> Vec<Vec<Data>> {
    let range = book
        .worksheet_range(name)
        .unwrap_or_else(|e| panic!("sheet {name}: {e}"));
    range.rows().map(|r| r.to_vec()).collect()
}

fn n(x: f64) -> Data {
    Data::Float(x)
}

fn s(t: &str) -> Data {
    Data::String(t.to_string())
}

/// A cell as the CSV report writes it.
fn as_csv(d: &Data) -> String {
    match d {
        Data::Float(x) => x.to_string(),
        Data::Int(i) => i.to_string(),
        Data::String(t) => t.clone(),
        Data::Empty => String::new(),
        other => panic!("unexpected cell {other:?}"),
    }
}

#[test]
fn the_report_as_a_spreadsheet() {
    let dir = TestDir::new("xlsx");
    let book_path = dir.join("report.xlsx");
    let run = Cmd::new("trace-summarize")
        .args([
            "--format", "xlsx", "--by", "status", "--window", "50ms", "-o",
        ])
        .arg(&book_path)
        .arg(data("results/conventions.ndjson"))
        .run();
    run.ok();
    assert!(run.stdout.is_empty());
    let mut book: Xlsx<_> = open_workbook(&book_path).unwrap();
    // The run has one error (record e's HTTP 500): the errors sheet lists it.
    assert_eq!(
        book.sheet_names(),
        ["summary", "requests", "errors", "windows"]
    );
    assert_eq!(
        sheet(&mut book, "errors"),
        [
            vec![s("count"), s("status"), s("http_status"), s("message")],
            vec![n(1.0), s("error"), n(500.0), s("HTTP 500: boom")],
        ]
    );

    // Summary: one row per figure of the JSON report, the run's value and
    // each group's, numbers as numbers.
    let summary = sheet(&mut book, "summary");
    assert_eq!(
        summary[0],
        [
            s("figure"),
            s("unit"),
            s("all"),
            s("status = error"),
            s("status = ok")
        ]
    );
    let row = |key: &str| -> Vec<Data> {
        summary
            .iter()
            .find(|r| r[0] == s(key))
            .unwrap_or_else(|| panic!("no row {key}"))
            .clone()
    };
    // A figure without a unit has an empty unit cell.
    assert_eq!(
        row("convention")[1..],
        [Data::Empty, s("tracekit"), s("tracekit"), s("tracekit")]
    );
    assert_eq!(
        row("requests.total")[1..],
        [Data::Empty, n(5.0), n(1.0), n(4.0)]
    );
    // TTFT 20, 30, 40, 50: nearest rank p50 is the 2nd; the error has none.
    assert_eq!(
        row("ttft.p50")[1..],
        [s("ms"), n(30.0), Data::Empty, n(30.0)]
    );
    // First send 0 to a's end, 110 ms; e alone: 40 to 45.
    assert_eq!(row("duration_s")[1..], [s("s"), n(0.11), n(0.005), n(0.11)]);
    // 4 + 6 + 1 tokens (d has no usage) over 0.11 s.
    assert_eq!(row("throughput.output_tokens_per_s")[1], s("tokens/s"));
    assert_eq!(row("throughput.output_tokens_per_s")[2], n(100.0));
    // Every figure is the CSV report's, in its order.
    let csv = run_file(
        "trace-summarize",
        &["--format", "csv", "--by", "status"],
        data("results/conventions.ndjson"),
    );
    csv.ok();
    let mut reader = csv::Reader::from_reader(&csv.stdout[..]);
    let keys: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(summary.len(), keys.len());
    for (i, key) in keys.iter().enumerate().skip(1) {
        let r = &summary[i];
        assert_eq!(as_csv(&r[0]), *key);
        for (g, record) in records.iter().enumerate() {
            // A number is the same number (the CSV writes 0.0, the cell 0).
            match record[i].parse::<f64>() {
                Ok(x) => assert_eq!(r[2 + g], n(x), "{key} is a number"),
                Err(_) => assert_eq!(as_csv(&r[2 + g]), record[i], "{key}, column {}", 2 + g),
            }
        }
    }

    // Requests: the --requests csv columns, one row per result.
    let requests = sheet(&mut book, "requests");
    let header = "index,id,session_id,model,shard,warmup,status,http_status,error,\
scheduled_ms,sent_ms,lag_ms,ttft_ms,first_chunk_ms,tpot_ms,e2e_ms,itl_count,itl_mean_ms,\
itl_max_ms,input_length,prompt_tokens,output_length,completion_tokens,cached_tokens,finish_reason";
    assert_eq!(
        requests[0].iter().map(as_csv).collect::<Vec<_>>().join(","),
        header
    );
    assert_eq!(requests.len(), 6);
    // a: TTFT 40 after a role chunk at 10; TPOT (110 − 40) / 3; gaps 20.
    assert_eq!(
        requests[1],
        [
            n(0.0),
            s("a"),
            Data::Empty,
            Data::Empty,
            Data::Empty,
            s("false"),
            s("ok"),
            n(200.0),
            Data::Empty,
            n(0.0),
            n(0.0),
            n(0.0),
            n(40.0),
            n(10.0),
            n(23.333),
            n(110.0),
            n(3.0),
            n(20.0),
            n(20.0),
            n(10.0),
            n(10.0),
            n(4.0),
            n(4.0),
            Data::Empty,
            s("length"),
        ]
    );
    // Every row is the --requests csv row.
    let want = run_file(
        "trace-summarize",
        &["--requests", "csv"],
        data("results/conventions.ndjson"),
    )
    .ok()
    .lines();
    for (got, want) in requests.iter().zip(&want) {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(got.iter().map(as_csv)).unwrap();
        let line = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(line.trim_end(), want);
    }

    // Windows of 50 ms. [0, 50): five sends, e ends (an error). [50,
    // 100): b, c, d end at 85, 75, 92; TTFT 30, 50, 20 → p50 30, p99 50;
    // E2E 75, 55, 62 → p50 62, p99 75. [100, 150): a ends, TTFT 40, E2E
    // 110. Output tokens count when their chunks arrived, each answer's
    // spread evenly over its chunks (d has no usage: none): a's 4 at 40,
    // 60, 80, 100; b's 6 as 2 at 40, 50, 80; c's 1 at 70. So 1 + 2 = 3
    // tokens in the first window (60/s), 2 + 2 + 2 + 1 = 7 in the second
    // (140/s), 1 in the third (20/s).
    let windows = sheet(&mut book, "windows");
    assert_eq!(
        windows[0],
        [
            s("start_s (s)"),
            s("started"),
            s("completed"),
            s("errors"),
            s("output_tokens_per_s (tokens/s)"),
            s("ttft_p50 (ms)"),
            s("ttft_p99 (ms)"),
            s("e2e_p50 (ms)"),
            s("e2e_p99 (ms)"),
        ]
    );
    let e = Data::Empty;
    assert_eq!(
        windows[1..],
        [
            vec![
                n(0.0),
                n(5.0),
                n(1.0),
                n(1.0),
                n(60.0),
                e.clone(),
                e.clone(),
                e.clone(),
                e
            ],
            vec![
                n(0.05),
                n(0.0),
                n(3.0),
                n(0.0),
                n(140.0),
                n(30.0),
                n(50.0),
                n(62.0),
                n(75.0)
            ],
            vec![
                n(0.1),
                n(0.0),
                n(1.0),
                n(0.0),
                n(20.0),
                n(40.0),
                n(40.0),
                n(110.0),
                n(110.0)
            ],
        ]
    );
}

#[test]
fn no_windows_sheet_without_window_and_one_column_without_by() {
    let dir = TestDir::new("xlsx-plain");
    let book_path = dir.join("Report.XLSX");
    Cmd::new("trace-summarize")
        .args(["--format", "xlsx", "-o"])
        .arg(&book_path)
        .arg(data("results/conventions.ndjson"))
        .run()
        .ok();
    let mut book: Xlsx<_> = open_workbook(&book_path).unwrap();
    assert_eq!(book.sheet_names(), ["summary", "requests", "errors"]);
    let summary = sheet(&mut book, "summary");
    assert_eq!(summary[0], [s("figure"), s("unit"), s("all")]);
}

#[test]
fn xlsx_needs_a_file_named_xlsx() {
    let run = run_file(
        "trace-summarize",
        &["--format", "xlsx"],
        data("results/conventions.ndjson"),
    );
    run.code(2).stderr_is(
        "trace-summarize: error: --format xlsx writes a spreadsheet, not text for a terminal or \
         a pipe: give -o FILE.xlsx\n",
    );
    assert!(run.stdout.is_empty());
    let dir = TestDir::new("xlsx-name");
    let run = Cmd::new("trace-summarize")
        .args(["--format", "xlsx", "-o"])
        .arg(dir.join("report.csv"))
        .arg(data("results/conventions.ndjson"))
        .run();
    run.code(2);
    assert!(
        run.stderr
            .contains("--format xlsx writes a spreadsheet: name it FILE.xlsx (-o "),
        "{}",
        run.stderr
    );
    assert!(!dir.join("report.csv").exists());
}

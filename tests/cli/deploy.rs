//! The Kubernetes manifests and the Dockerfile under deploy/: no cluster
//! here, so check what matters for a sharded replay.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

fn load(name: &str) -> Yaml {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kubernetes")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(docs.len(), 1, "{name}: one document");
    docs.remove(0)
}

fn container(job: &Yaml) -> &Yaml {
    &job["spec"]["template"]["spec"]["containers"][0]
}

/// The shell script the container runs: its command's last word.
fn script(c: &Yaml) -> &str {
    c["command"]
        .as_vec()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap()
}

fn env<'a>(c: &'a Yaml, name: &str) -> &'a str {
    c["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("env {name}"))
}

/// Each volume mount names a volume of the pod.
fn mounts_resolve(job: &Yaml) {
    let volumes: Vec<&str> = job["spec"]["template"]["spec"]["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for m in container(job)["volumeMounts"].as_vec().unwrap() {
        assert!(volumes.contains(&m["name"].as_str().unwrap()), "{m:?}");
    }
}

#[test]
fn the_replay_job_runs_every_shard_at_once_from_one_start_time() {
    let job = load("replay-job.yaml");
    assert_eq!(job["apiVersion"].as_str(), Some("batch/v1"));
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_i64().unwrap();
    assert_eq!(spec["parallelism"].as_i64(), Some(n));
    assert_eq!(spec["backoffLimit"].as_i64(), Some(0));
    assert_eq!(
        spec["template"]["spec"]["restartPolicy"].as_str(),
        Some("Never")
    );
    let c = container(&job);
    assert_eq!(env(c, "SHARDS"), n.to_string());
    tracekit::time::parse_rfc3339(env(c, "START_AT")).unwrap();
    let script = script(c);
    for needle in [
        "K=$((JOB_COMPLETION_INDEX+1))",
        "trace-replay --shard \"$K/$SHARDS\" --start-at \"$START_AT\"",
        "-o \"/data/results/shard-$K-of-$SHARDS.ndjson\"",
    ] {
        assert!(script.contains(needle), "{needle} not in {script}");
    }
    mounts_resolve(&job);
}

#[test]
fn the_summary_job_reads_every_shard() {
    let job = load("summarize-job.yaml");
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let c = container(&job);
    let script = script(c);
    assert!(
        script.contains("trace-summarize /data/results/shard-*.ndjson"),
        "{script}"
    );
    assert_eq!(c["image"], container(&load("replay-job.yaml"))["image"]);
    mounts_resolve(&job);
}

#[test]
fn the_image_holds_every_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docker = std::fs::read_to_string(root.join("deploy/Dockerfile")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let bins: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"trace-"))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let copied: Vec<&str> = docker
        .split("target/release/trace-")
        .skip(1)
        .map(|rest| rest.split_whitespace().next().unwrap())
        .collect();
    let (mut a, mut b) = (bins.clone(), copied.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "binaries in Cargo.toml vs copied by the Dockerfile");
    assert!(docker.contains("COPY --from=build /out/ /usr/local/bin/"));
}

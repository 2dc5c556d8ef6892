//! Model names (`ORG/NAME`) found in the local Hugging Face cache, the
//! layout `huggingface_hub` downloads into. Never the network: a replay
//! must not depend on a download, nor leak which model it tests.

use std::path::{Path, PathBuf};

/// The hub cache directory, chosen as `huggingface_hub` chooses it:
/// `HF_HUB_CACHE`, else `HF_HOME/hub`, else
/// `XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub(super) fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|x| x.join("huggingface").join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
}

/// Whether `spec` reads as a model name (`gpt2`, `Qwen/Qwen3-8B`) rather
/// than a file's path.
pub(super) fn is_model_name(spec: &str) -> bool {
    let parts: Vec<&str> = spec.split('/').collect();
    !spec.ends_with(".json")
        && parts.len() <= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && !p.starts_with('.') && !p.starts_with('~'))
}

/// The directory of `model` in the cache.
pub(super) fn model_dir(cache: &Path, model: &str) -> PathBuf {
    cache.join(format!("models--{}", model.replace('/', "--")))
}

/// The `tokenizer.json` of `model`: in the snapshot `refs/main` names, else
/// in the most recently written snapshot that has one.
pub(super) fn find(cache: &Path, model: &str) -> Option<PathBuf> {
    let dir = model_dir(cache, model);
    let snapshots = dir.join("snapshots");
    if let Ok(main) = std::fs::read_to_string(dir.join("refs").join("main")) {
        let file = snapshots.join(main.trim()).join("tokenizer.json");
        if file.is_file() {
            return Some(file);
        }
    }
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| {
            let file = e.ok()?.path().join("tokenizer.json");
            let modified = std::fs::metadata(&file).ok()?.modified().ok()?;
            Some((modified, file))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, file)| file)
}

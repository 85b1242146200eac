//! Every file of an index damaged in turn (cut to half its length, random bytes flipped, zeroed):
//! `search`, `inspect --verify` and `index` never panic, an error names the damaged file, and
//! `index --repair` gives back a sound index of the same documents.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{documents, run, scar_tiny};

/// Ways a file is damaged.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut to half its length.
    Truncate,
    /// Eight bytes at pseudo-random places flipped.
    Flip,
    /// Every byte zeroed, the length kept.
    Zero,
}

impl Damage {
    fn apply(self, path: &Path, seed: u64) {
        let mut bytes = std::fs::read(path).unwrap();
        match self {
            Self::Truncate => bytes.truncate(bytes.len() / 2),
            Self::Flip => {
                let mut state = seed;
                for _ in 0..8.min(bytes.len()) {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let at = (state >> 33) as usize % bytes.len();
                    bytes[at] ^= 0xFF;
                }
            }
            Self::Zero => bytes.fill(0),
        }
        std::fs::write(path, bytes).unwrap();
    }
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(
                files(&path)
                    .into_iter()
                    .map(|p| Path::new(&entry.file_name()).join(p)),
            );
        } else {
            found.push(PathBuf::from(entry.file_name()));
        }
    }
    found.sort();
    found
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for file in files(from) {
        std::fs::create_dir_all(to.join(&file).parent().unwrap()).unwrap();
        std::fs::copy(from.join(&file), to.join(&file)).unwrap();
    }
}

/// Runs `command`: it must exit 0 or 3, or 1 with an error that names `file`; never panic.
/// Returns what went wrong otherwise.
fn check(command: &mut Command, file: &Path) -> Option<String> {
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let name = file.file_name().unwrap().to_string_lossy();
    let args: Vec<_> = command
        .get_args()
        .skip(2)
        .map(|a| a.to_string_lossy())
        .collect();
    let args = args.join(" ");
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        return Some(format!("`{args}` panicked: {stderr}"));
    }
    match output.status.code() {
        Some(0 | 3) => None,
        Some(1) if stderr.contains(&*name) || stdout.contains(&*name) => None,
        Some(1) => Some(format!("`{args}` does not name {name}: {stdout}{stderr}")),
        code => Some(format!("`{args}` exited with {code:?}: {stderr}")),
    }
}

#[test]
fn every_file_damaged_every_way_is_reported_and_repaired() {
    let docs = tempfile::tempdir().unwrap();
    for (name, words) in [("ferry.txt", 400), ("tides.txt", 300), ("camp.txt", 200)] {
        let text: Vec<String> = (0..words).map(|w| format!("{name} word{w}.")).collect();
        std::fs::write(docs.path().join(name), text.join(" ")).unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let pristine = work.path().join("pristine");
    run(scar_tiny(&pristine)
        .arg("index")
        .arg(docs.path())
        .arg("--hnsw"));
    let expected = documents(&pristine);
    let mut cases = 0;
    let mut failures = Vec::new();
    for file in files(&pristine) {
        for (seed, damage) in [Damage::Truncate, Damage::Flip, Damage::Zero]
            .into_iter()
            .enumerate()
        {
            let case = format!("{} {damage:?}", file.display());
            let dir = work.path().join("damaged");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            copy(&pristine, &dir);
            damage.apply(&dir.join(&file), seed as u64 + 1);
            let index = docs.path().as_os_str();
            for args in [
                &["search".as_ref(), "ferry word7".as_ref()][..],
                &["inspect".as_ref(), "--verify".as_ref()],
                &["index".as_ref(), index],
            ] {
                let mut command = scar_tiny(&dir);
                command.args(args);
                failures.extend(check(&mut command, &file).map(|f| format!("{case}: {f}")));
            }
            let repair = scar_tiny(&dir)
                .args(["index", "--repair"])
                .arg(docs.path())
                .output()
                .unwrap();
            if !repair.status.success() {
                let stderr = String::from_utf8_lossy(&repair.stderr);
                failures.push(format!("{case}: the repair failed: {stderr}"));
                continue;
            }
            run(scar_tiny(&dir).args(["inspect", "--verify"]));
            assert_eq!(documents(&dir), expected, "{case}");
            cases += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!("{cases} damaged indexes reported and repaired");
}

//! Reading a file under a watchdog, so that no file can keep the rest of a folder out of the
//! index.
//!
//! A file is read and cut on a thread of its own while the run watches the clock, the
//! process's memory and the cancel flag. A file that takes too long is left to its thread and
//! skipped; one that takes too much memory ends the run, since that memory cannot be taken
//! back; one that aborts the process (or gets it killed) ends it too. Each of these is
//! remembered in the quarantine, beside the index, and later runs skip the file until it
//! changes or its limit is raised. The file being read is named in a marker written before
//! reading starts, which is how a run that died is traced to its file; since a person may
//! have killed that run, the file is first a suspect: the next run reads it last, after
//! committing everything else, and skips it only once it has ended two runs.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{io_error, panic_message};
use crate::folder::{IndexFile, write_replacing};
use crate::load::LoadOptions;
use crate::{IndexError, Result};

/// How often the watchdog looks at the clock, the memory and the cancel flag.
const POLL: Duration = Duration::from_millis(50);

thread_local! {
    /// On a reader thread, the flag the watchdog sets when it stops waiting for the work.
    static GIVEN_UP: OnceCell<Arc<AtomicBool>> = const { OnceCell::new() };
}

/// True on a reader thread whose work the watchdog no longer waits for (it ran out of time, or
/// the run was cancelled or stopped): long loops and the programs a reader runs check it, so
/// that the thread ends instead of running on for nothing.
pub(crate) fn given_up() -> bool {
    GIVEN_UP.with(|flag| flag.get().is_some_and(|flag| flag.load(Ordering::Relaxed)))
}

/// The error a reader ends with once it finds it was [`given_up`] on; nobody reads it.
pub(crate) fn stopped() -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        "the watchdog stopped waiting for it",
    )
}

/// A file's identity for the quarantine: its path and the stamp that tells it changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stamped {
    #[serde(with = "crate::store::stored_path")]
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) modified_ns: u64,
}

/// A file that stopped a run, and how.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Quarantined {
    #[serde(flatten)]
    file: Stamped,
    reason: String,
    /// The limit it went over; none when the process died reading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overrun: Option<Overrun>,
    /// Runs that died reading it, one after the other: one makes it a suspect, two skip it.
    #[serde(default)]
    deaths: u32,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct QuarantineFile {
    files: Vec<Quarantined>,
}

/// Why a file is skipped that two runs died reading, when no watchdog saw it happen.
const DIED_READING: &str = "the process ended while reading it, twice (the reader crashed, ran \
                            out of memory or was killed)";

/// The files that stopped a run, skipped until they change.
pub(crate) struct Quarantine {
    dir: PathBuf,
    files: BTreeMap<PathBuf, Quarantined>,
}

impl Quarantine {
    /// The index's quarantine, with the file an earlier run died reading, if one did. A
    /// damaged list is dropped: at worst a bad file costs one more run.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let read = |file: IndexFile| fs_err::read(file.path(dir)).ok();
        let mut files: BTreeMap<PathBuf, Quarantined> = read(IndexFile::Quarantine)
            .and_then(|json| serde_json::from_slice::<QuarantineFile>(&json).ok())
            .unwrap_or_default()
            .files
            .into_iter()
            .map(|entry| (entry.file.path.clone(), entry))
            .collect();
        let marker = IndexFile::Reading.path(dir);
        if let Some(file) =
            read(IndexFile::Reading).and_then(|json| serde_json::from_slice::<Stamped>(&json).ok())
        {
            let fresh = Quarantined {
                file: file.clone(),
                reason: DIED_READING.to_owned(),
                overrun: None,
                deaths: 0,
            };
            let entry = files
                .entry(file.path.clone())
                .or_insert_with(|| fresh.clone());
            if entry.file != file || entry.overrun.is_some() {
                *entry = fresh;
            }
            entry.deaths += 1;
        }
        let quarantine = Self {
            dir: dir.to_owned(),
            files,
        };
        if marker.exists() {
            quarantine.save()?;
            fs_err::remove_file(&marker).map_err(io_error(&marker))?;
        }
        Ok(quarantine)
    }

    /// Why `file` is skipped without being read, if it stopped a run as it is now, under
    /// limits no higher than `options` sets.
    pub(crate) fn reason_to_skip(&self, file: &Stamped, options: &LoadOptions) -> Option<String> {
        let entry = self.files.get(&file.path)?;
        let skipped = match entry.overrun {
            Some(overrun) => !overrun.raised_in(options),
            None => entry.deaths >= 2,
        };
        (entry.file == *file && skipped).then(|| {
            format!(
                "{} in an earlier run; skipped until the file changes",
                entry.reason
            )
        })
    }

    /// True when one run died reading `file` as it is now: the next reads it last.
    pub(crate) fn is_suspect(&self, file: &Stamped) -> bool {
        self.files.get(&file.path).is_some_and(|entry| {
            entry.file == *file && entry.overrun.is_none() && entry.deaths == 1
        })
    }

    /// Forgets `path`, read through to the end.
    pub(crate) fn clear(&mut self, path: &Path) -> Result<()> {
        if self.files.remove(path).is_some() {
            return self.save();
        }
        Ok(())
    }

    /// Forgets the files under `roots` that a run found changed or gone (all but `kept`).
    pub(crate) fn retain_under(&mut self, roots: &[PathBuf], kept: &[&Path]) -> Result<()> {
        let before = self.files.len();
        self.files.retain(|path, _| {
            kept.contains(&path.as_path()) || !roots.iter().any(|root| path.starts_with(root))
        });
        if self.files.len() == before {
            return Ok(());
        }
        self.save()
    }

    /// Skips `file` from now on, unless that limit is raised.
    pub(crate) fn add(&mut self, file: Stamped, overrun: Overrun) -> Result<()> {
        let entry = Quarantined {
            file,
            reason: overrun.reason(),
            overrun: Some(overrun),
            deaths: 0,
        };
        self.files.insert(entry.file.path.clone(), entry);
        self.save()
    }

    fn save(&self) -> Result<()> {
        let path = IndexFile::Quarantine.path(&self.dir);
        if self.files.is_empty() {
            return match fs_err::remove_file(&path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    Err(io_error(&path)(error))
                }
                _ => Ok(()),
            };
        }
        let list = QuarantineFile {
            files: self.files.values().cloned().collect(),
        };
        let json = serde_json::to_string_pretty(&list)
            .map_err(IndexError::encode("the quarantined files"))?;
        write_replacing(&path, json)
    }
}

/// How the watchdog ended a file's reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Overrun {
    /// It took longer than the limit; the thread reading it is told to stop, and left to end.
    Time(Duration),
    /// The process grew by more than the limit, in bytes, while reading it.
    Memory(u64),
}

impl Overrun {
    /// True when `options` allow more than the limit this was.
    fn raised_in(self, options: &LoadOptions) -> bool {
        match self {
            Self::Time(limit) => options.max_read_time > limit,
            Self::Memory(limit) => options.max_read_memory > limit,
        }
    }

    /// What a person is told about the file.
    pub(crate) fn reason(self) -> String {
        match self {
            Self::Time(limit) => format!(
                "reading it took longer than {} s (--max-file-seconds)",
                limit.as_secs()
            ),
            Self::Memory(limit) => format!(
                "reading it took more than {} MiB of memory (--max-file-memory-mib)",
                limit / (1024 * 1024)
            ),
        }
    }
}

/// Why the watchdog stopped waiting for a piece of work.
#[derive(Debug)]
pub(crate) enum Interrupted {
    /// It panicked: a bug in a reader, with its message.
    Panicked(String),
    /// The run was cancelled; the work is left to its thread.
    Cancelled,
    /// It went over a limit.
    Overran(Overrun),
}

/// Watches the reading of one file, from its start to [`Watchdog::finish`].
pub(crate) struct Watchdog<'a> {
    marker: PathBuf,
    started: Instant,
    options: &'a LoadOptions,
    cancel: &'a AtomicBool,
    /// The process's resident memory when reading started, where the platform tells it.
    baseline: Option<u64>,
}

impl<'a> Watchdog<'a> {
    /// Starts watching the reading of `file` for the index in `dir`: names it in the marker.
    pub(crate) fn start(
        dir: &Path,
        file: &Stamped,
        options: &'a LoadOptions,
        cancel: &'a AtomicBool,
    ) -> Result<Self> {
        let marker = IndexFile::Reading.path(dir);
        let json = serde_json::to_vec(file).map_err(IndexError::encode("the file being read"))?;
        fs_err::write(&marker, json).map_err(io_error(&marker))?;
        Ok(Self {
            marker,
            started: Instant::now(),
            options,
            cancel,
            baseline: resident_bytes(),
        })
    }

    /// Runs `work` on a thread of its own and waits for it, within the file's limits: its
    /// result, or why the watchdog stopped waiting. Once it stops waiting, [`given_up`] is true
    /// on that thread.
    pub(crate) fn watch<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, Interrupted>> {
        let (sender, receiver) = mpsc::sync_channel(1);
        let given_up = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&given_up);
        let reader = thread::Builder::new()
            .name("scar-reader".to_owned())
            .spawn(move || {
                GIVEN_UP.with(|cell| {
                    cell.get_or_init(|| flag);
                });
                // The receiver is gone when the watchdog gave up on this work.
                let _ = sender.send(work());
            })
            .map_err(io_error(&self.marker))?;
        let how = loop {
            match receiver.recv_timeout(POLL) {
                Ok(value) => return Ok(Ok(value)),
                Err(RecvTimeoutError::Disconnected) => {
                    let message = match reader.join() {
                        Err(payload) => panic_message(payload.as_ref())
                            .unwrap_or_else(|| "a reader panicked".to_owned()),
                        Ok(()) => "its reader stopped without a result".to_owned(),
                    };
                    return Ok(Err(Interrupted::Panicked(message)));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.cancel.load(Ordering::Relaxed) {
                break Interrupted::Cancelled;
            }
            if self.started.elapsed() > self.options.max_read_time {
                break Interrupted::Overran(Overrun::Time(self.options.max_read_time));
            }
            if let (Some(baseline), Some(now)) = (self.baseline, resident_bytes())
                && now.saturating_sub(baseline) > self.options.max_read_memory
            {
                break Interrupted::Overran(Overrun::Memory(self.options.max_read_memory));
            }
        };
        given_up.store(true, Ordering::Relaxed);
        Ok(Err(how))
    }

    /// Reading is over, whatever came of it: the marker goes.
    pub(crate) fn finish(self) -> Result<()> {
        fs_err::remove_file(&self.marker).map_err(io_error(&self.marker))
    }
}

/// The process's resident memory in bytes, where the platform tells it.
fn resident_bytes() -> Option<u64> {
    memory_stats::memory_stats().map(|stats| stats.physical_mem as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(path: &str, size: u64) -> Stamped {
        Stamped {
            path: PathBuf::from(path),
            size,
            modified_ns: 7,
        }
    }

    #[test]
    fn a_file_two_runs_died_reading_is_skipped_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let options = LoadOptions::default();
        let cancel = AtomicBool::new(false);
        let bomb = stamped("/docs/bomb.xlsx", 1400);
        // A run starts reading the file and dies: the watchdog never finishes.
        let die_reading = |file: &Stamped| {
            std::mem::forget(Watchdog::start(dir.path(), file, &options, &cancel).unwrap());
        };
        die_reading(&bomb);
        let mut quarantine = Quarantine::open(dir.path()).unwrap();
        assert!(!IndexFile::Reading.path(dir.path()).exists());
        // Once is suspect (someone may have killed the run): read again, last.
        assert!(quarantine.is_suspect(&bomb));
        assert_eq!(quarantine.reason_to_skip(&bomb, &options), None);
        // Read through, it is forgotten.
        quarantine.clear(&bomb.path).unwrap();
        assert!(!Quarantine::open(dir.path()).unwrap().is_suspect(&bomb));

        die_reading(&bomb);
        drop(Quarantine::open(dir.path()).unwrap());
        die_reading(&bomb);
        let quarantine = Quarantine::open(dir.path()).unwrap();
        assert!(!quarantine.is_suspect(&bomb));
        let skip =
            |quarantine: &Quarantine, file: &Stamped| quarantine.reason_to_skip(file, &options);
        let reason = skip(&quarantine, &bomb).unwrap();
        assert!(reason.starts_with(DIED_READING), "{reason}");
        assert_eq!(skip(&quarantine, &stamped("/docs/bomb.xlsx", 1401)), None);
        assert_eq!(skip(&quarantine, &stamped("/docs/other.xlsx", 1400)), None);

        // It stays quarantined across runs, until a run finds it changed.
        let mut quarantine = Quarantine::open(dir.path()).unwrap();
        assert!(skip(&quarantine, &bomb).is_some());
        quarantine
            .retain_under(&[PathBuf::from("/docs")], &[])
            .unwrap();
        assert!(!IndexFile::Quarantine.path(dir.path()).exists());
        assert_eq!(skip(&Quarantine::open(dir.path()).unwrap(), &bomb), None);
    }

    #[test]
    fn a_file_over_a_limit_is_tried_again_when_the_limit_is_raised() {
        let dir = tempfile::tempdir().unwrap();
        let slow = stamped("/docs/huge.txt", 40 << 20);
        let mut quarantine = Quarantine::open(dir.path()).unwrap();
        quarantine
            .add(slow.clone(), Overrun::Time(Duration::from_secs(5)))
            .unwrap();
        let quarantine = Quarantine::open(dir.path()).unwrap();
        let limit = |seconds| LoadOptions {
            max_read_time: Duration::from_secs(seconds),
            ..LoadOptions::default()
        };
        let reason = quarantine.reason_to_skip(&slow, &limit(5)).unwrap();
        assert_eq!(
            reason,
            "reading it took longer than 5 s (--max-file-seconds) in an earlier run; skipped \
             until the file changes"
        );
        assert!(quarantine.reason_to_skip(&slow, &limit(1)).is_some());
        assert_eq!(quarantine.reason_to_skip(&slow, &limit(6)), None);
    }

    #[test]
    fn work_given_up_on_is_told_to_stop() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = AtomicBool::new(false);
        let options = LoadOptions {
            max_read_time: Duration::from_millis(200),
            ..LoadOptions::default()
        };
        let watchdog =
            Watchdog::start(dir.path(), &stamped("/docs/a.txt", 3), &options, &cancel).unwrap();
        // Told nothing while it is waited for, nor on threads the watchdog did not start.
        assert!(matches!(watchdog.watch(given_up).unwrap(), Ok(false)));
        assert!(!given_up());
        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        let slow = watchdog.watch(move || {
            while !given_up() {
                thread::sleep(Duration::from_millis(10));
            }
            flag.store(true, Ordering::Relaxed);
        });
        assert!(matches!(slow.unwrap(), Err(Interrupted::Overran(_))));
        let deadline = Instant::now() + Duration::from_secs(1);
        while !ended.load(Ordering::Relaxed) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(ended.load(Ordering::Relaxed), "the work runs on");
        watchdog.finish().unwrap();
    }

    #[test]
    fn work_is_watched_for_its_result_panics_time_and_cancels() {
        let dir = tempfile::tempdir().unwrap();
        let file = stamped("/docs/a.txt", 3);
        let cancel = AtomicBool::new(false);
        let options = LoadOptions {
            max_read_time: Duration::from_millis(200),
            ..LoadOptions::default()
        };
        let watchdog = Watchdog::start(dir.path(), &file, &options, &cancel).unwrap();
        assert!(matches!(watchdog.watch(|| 42).unwrap(), Ok(42)));
        let slow = watchdog.watch(|| thread::sleep(Duration::from_secs(5)));
        assert!(matches!(
            slow.unwrap(),
            Err(Interrupted::Overran(Overrun::Time(limit))) if limit == options.max_read_time
        ));
        watchdog.finish().unwrap();
        assert!(!IndexFile::Reading.path(dir.path()).exists());

        // Under the default limit: a panic hook printing a backtrace can take longer than 200 ms.
        let defaults = LoadOptions::default();
        let watchdog = Watchdog::start(dir.path(), &file, &defaults, &cancel).unwrap();
        match watchdog.watch(|| -> u8 { panic!("bad cell") }).unwrap() {
            Err(Interrupted::Panicked(message)) => assert_eq!(message, "bad cell"),
            _ => panic!("a panic is reported"),
        }
        cancel.store(true, Ordering::Relaxed);
        let started = Instant::now();
        let cancelled = watchdog.watch(|| thread::sleep(Duration::from_secs(5)));
        assert!(matches!(cancelled.unwrap(), Err(Interrupted::Cancelled)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn memory_growth_past_the_limit_is_caught() {
        if resident_bytes().is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cancel = AtomicBool::new(false);
        let options = LoadOptions {
            max_read_memory: 64 * 1024 * 1024,
            ..LoadOptions::default()
        };
        let file = stamped("/docs/bomb.ods", 764);
        let watchdog = Watchdog::start(dir.path(), &file, &options, &cancel).unwrap();
        // Touches a gigabyte a page at a time, slowly enough to be seen, then holds it.
        let grown = watchdog.watch(|| {
            let mut pages: Vec<Vec<u8>> = Vec::new();
            for _ in 0..1024 {
                pages.push(vec![1; 1024 * 1024]);
                thread::sleep(Duration::from_millis(1));
            }
            thread::sleep(Duration::from_secs(5));
            pages.len()
        });
        assert!(matches!(
            grown.unwrap(),
            Err(Interrupted::Overran(Overrun::Memory(limit))) if limit == options.max_read_memory
        ));
    }
}

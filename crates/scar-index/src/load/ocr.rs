//! Text of a scanned PDF by optical character recognition: poppler's `pdftoppm` draws each
//! page as an image and `tesseract` reads it, when both are installed (Debian: poppler-utils,
//! tesseract-ocr). Both run as separate programs, so a page that crashes them is a skipped
//! file, not a crash; and once the watchdog gives up on the file, the program running is
//! killed rather than left to read the rest of a long scan.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::Duration;

use super::LoadError;

/// The programs OCR runs; tests name missing ones.
pub(super) struct OcrTools<'a> {
    pub rasterizer: &'a str,
    pub reader: &'a str,
}

impl Default for OcrTools<'_> {
    fn default() -> Self {
        Self {
            rasterizer: "pdftoppm",
            reader: "tesseract",
        }
    }
}

/// Page images at 300 dots per inch, in grey: what tesseract reads best.
const RESOLUTION: &str = "300";

/// The text of every page of the PDF `bytes`, in page order; [`LoadError::PdfNeedsOcr`] when
/// the programs are not installed.
pub(super) fn pdf_text(bytes: &[u8], tools: &OcrTools) -> Result<Vec<String>, LoadError> {
    let (scratch, pdf) = scratch_copy(bytes)?;
    read_pages(&pdf, scratch.path(), None, tools)
}

/// The text of each of `pages` (numbered from 1) of the PDF `bytes`, in that order.
pub(super) fn pdf_pages_text(
    bytes: &[u8],
    pages: &[usize],
    tools: &OcrTools,
) -> Result<Vec<String>, LoadError> {
    let (scratch, pdf) = scratch_copy(bytes)?;
    pages
        .iter()
        .map(|&page| Ok(read_pages(&pdf, scratch.path(), Some(page), tools)?.concat()))
        .collect()
}

/// A scratch folder holding the PDF `bytes` as a file, for the programs to read; the page
/// images are drawn beside it, and all goes with the folder.
fn scratch_copy(bytes: &[u8]) -> io::Result<(tempfile::TempDir, PathBuf)> {
    let scratch = tempfile::tempdir()?;
    let pdf = scratch.path().join("scan.pdf");
    std::fs::write(&pdf, bytes)?;
    Ok((scratch, pdf))
}

/// Draws the pages of `pdf` (all, or the one numbered `only`) into `scratch` and reads each,
/// in page order.
fn read_pages(
    pdf: &Path,
    scratch: &Path,
    only: Option<usize>,
    tools: &OcrTools,
) -> Result<Vec<String>, LoadError> {
    let mut rasterize = Command::new(tools.rasterizer);
    rasterize.args(["-r", RESOLUTION, "-gray", "-png"]);
    if let Some(page) = only {
        let page = page.to_string();
        rasterize.args(["-f", &page, "-l", &page]);
    }
    let drawn = run(rasterize.arg(pdf).arg(scratch.join("page")), scratch)?;
    if !drawn.status.success() {
        return Err(failed("pdftoppm", &drawn));
    }
    // `page-1.png` … or `page-01.png` …: zero-padded to the page count, so names sort in order.
    let mut pages: Vec<_> = std::fs::read_dir(scratch)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "png"))
        .collect();
    pages.sort();
    let mut texts = Vec::with_capacity(pages.len());
    for page in &pages {
        texts.push(read_page(page, scratch, tools)?);
        // Pages are large; each goes once it is read.
        std::fs::remove_file(page)?;
    }
    Ok(texts)
}

fn read_page(page: &Path, scratch: &Path, tools: &OcrTools) -> Result<String, LoadError> {
    let read = run(Command::new(tools.reader).arg(page).arg("stdout"), scratch)?;
    if !read.status.success() {
        return Err(failed("tesseract", &read));
    }
    // Tesseract ends each page with a form feed.
    Ok(String::from_utf8_lossy(&read.stdout).replace('\u{c}', ""))
}

/// How often a running program is checked on.
const POLL: Duration = Duration::from_millis(20);

/// Runs `command` to its end, its output kept in files in `scratch` (a pipe left unread
/// would stall it); a program that is not installed means OCR is not available. Killed, and
/// an error, once the watchdog gives up on the file.
fn run(command: &mut Command, scratch: &Path) -> Result<Output, LoadError> {
    let (stdout, stderr) = (scratch.join("stdout"), scratch.join("stderr"));
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(File::create(&stdout)?)
        .stderr(File::create(&stderr)?)
        .spawn()
        .map_err(|error| match error.kind() {
            io::ErrorKind::NotFound => LoadError::PdfNeedsOcr,
            _ => LoadError::Io(error),
        })?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if crate::watchdog::given_up() {
            // Already ended, if it cannot be killed; either way it is waited for.
            let _ = child.kill();
            child.wait()?;
            return Err(crate::watchdog::stopped().into());
        }
        thread::sleep(POLL);
    };
    Ok(Output {
        status,
        stdout: std::fs::read(&stdout)?,
        stderr: std::fs::read(&stderr)?,
    })
}

fn failed(program: &str, output: &Output) -> LoadError {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last_line = stderr.lines().rev().find(|line| !line.trim().is_empty());
    LoadError::CorruptPdf(
        format!(
            "{program} failed on it ({})",
            last_line.unwrap_or("no message")
        )
        .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_say_what_to_install() {
        let tools = OcrTools {
            rasterizer: "/nonexistent/pdftoppm",
            reader: "tesseract",
        };
        let error = pdf_text(b"%PDF-1.4", &tools).unwrap_err();
        assert!(matches!(error, LoadError::PdfNeedsOcr), "{error:?}");
        assert_eq!(
            error.to_string(),
            "PDF has no text layer (scanned images?); install tesseract-ocr and poppler-utils \
             to read it by OCR"
        );
    }

    #[test]
    fn a_program_running_when_the_watchdog_gives_up_is_killed() {
        use std::os::unix::fs::PermissionsExt;
        use std::sync::atomic::AtomicBool;
        use std::time::Instant;

        use crate::load::LoadOptions;
        use crate::watchdog::{Interrupted, Stamped, Watchdog};

        let dir = tempfile::tempdir().unwrap();
        let (script, pid) = (dir.path().join("pdftoppm"), dir.path().join("pid"));
        let body = format!("#!/bin/sh\necho $$ > {}\nexec sleep 30\n", pid.display());
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let options = LoadOptions {
            max_read_time: Duration::from_millis(300),
            ..LoadOptions::default()
        };
        let cancel = AtomicBool::new(false);
        let file = Stamped {
            path: dir.path().join("scan.pdf"),
            size: 8,
            modified_ns: 1,
        };
        let watchdog = Watchdog::start(dir.path(), &file, &options, &cancel).unwrap();
        let rasterizer = script.to_str().unwrap().to_owned();
        let read = watchdog.watch(move || {
            let tools = OcrTools {
                rasterizer: &rasterizer,
                reader: "tesseract",
            };
            pdf_text(b"%PDF-1.4", &tools).map(|_| ())
        });
        assert!(matches!(read.unwrap(), Err(Interrupted::Overran(_))));
        watchdog.finish().unwrap();
        let pid = std::fs::read_to_string(&pid).unwrap();
        let running = Path::new("/proc").join(pid.trim());
        let deadline = Instant::now() + Duration::from_secs(1);
        while running.exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!running.exists(), "the rasterizer runs on");
    }
}

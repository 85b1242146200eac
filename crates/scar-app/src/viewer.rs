//! Opening a file in the system's viewer, and a PDF at a page: the default PDF viewer is looked
//! up (freedesktop's `xdg-mime`) and, if it is one that takes a page on its command line, it is
//! started with the page; any other viewer, or a system without `xdg-mime`, opens the file at
//! its start.

use std::path::Path;
use std::process::Command;

/// Opens `path` with the system's default application, at `page` where the viewer can be told
/// one. Blocks until a viewer started here exits, so it belongs on a thread of its own.
pub fn open(path: &Path, page: Option<u32>) -> std::io::Result<()> {
    if let Some(page) = page
        && let Some(viewer) = default_pdf_viewer()
        && let Some(mut command) = command_at_page(&viewer, path, page)
    {
        // A viewer that is not installed after all opens the file the ordinary way.
        if let Ok(status) = command.status() {
            return if status.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "{viewer} could not open it ({status})"
                )))
            };
        }
    }
    opener::open(path).map_err(std::io::Error::other)
}

/// The desktop entry of the default PDF viewer, e.g. `org.gnome.Evince.desktop`.
fn default_pdf_viewer() -> Option<String> {
    let output = Command::new("xdg-mime")
        .args(["query", "default", "application/pdf"])
        .output()
        .ok()?;
    let entry = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !entry.is_empty()).then_some(entry)
}

/// The command that opens `path` at `page` in the viewer whose desktop entry is `entry`, for
/// the viewers whose command line takes a page.
fn command_at_page(entry: &str, path: &Path, page: u32) -> Option<Command> {
    let entry = entry.to_ascii_lowercase();
    let name = entry.strip_suffix(".desktop").unwrap_or(&entry);
    let mut command;
    let page = page.to_string();
    if let Some(program) = ["evince", "atril", "xreader"]
        .into_iter()
        .find(|program| name.contains(program))
    {
        // The GNOME viewer and its forks: the page's index, counted from 1.
        command = Command::new(program);
        command.arg(format!("--page-index={page}")).arg(path);
    } else if name.contains("okular") {
        command = Command::new("okular");
        command.args(["--page", &page]).arg(path);
    } else if name.contains("zathura") {
        command = Command::new("zathura");
        command.arg(format!("--page={page}")).arg(path);
    } else if name.contains("sioyek") {
        command = Command::new("sioyek");
        command.args(["--page", &page]).arg(path);
    } else if name.contains("qpdfview") {
        // The page follows the file name after a `#`.
        command = Command::new("qpdfview");
        let mut target = path.as_os_str().to_owned();
        target.push(format!("#{page}"));
        command.arg(target);
    } else if name.rsplit('.').next() == Some("mupdf") {
        command = Command::new("mupdf");
        command.arg(path).arg(page);
    } else {
        return None;
    }
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(entry: &str) -> Option<Vec<String>> {
        let command = command_at_page(entry, Path::new("/d/harbour rules.pdf"), 7)?;
        let mut line = vec![command.get_program().to_string_lossy().into_owned()];
        line.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
        Some(line)
    }

    #[test]
    fn viewers_that_take_a_page_are_told_it_their_way() {
        let file = "/d/harbour rules.pdf";
        for (entry, expected) in [
            (
                "org.gnome.Evince.desktop",
                vec!["evince", "--page-index=7", file],
            ),
            ("atril.desktop", vec!["atril", "--page-index=7", file]),
            (
                "okularApplication_pdf.desktop",
                vec!["okular", "--page", "7", file],
            ),
            (
                "org.kde.okular.desktop",
                vec!["okular", "--page", "7", file],
            ),
            (
                "org.pwmt.zathura-pdf-mupdf.desktop",
                vec!["zathura", "--page=7", file],
            ),
            ("sioyek.desktop", vec!["sioyek", "--page", "7", file]),
            (
                "qpdfview.desktop",
                vec!["qpdfview", "/d/harbour rules.pdf#7"],
            ),
            ("mupdf.desktop", vec!["mupdf", file, "7"]),
        ] {
            assert_eq!(
                line(entry),
                Some(expected.iter().map(|s| (*s).to_owned()).collect())
            );
        }
    }

    #[test]
    fn other_viewers_open_the_file_at_its_start() {
        for entry in [
            "firefox.desktop",
            "libreoffice-draw.desktop",
            "",
            "gimp.desktop",
        ] {
            assert_eq!(line(entry), None, "{entry}");
        }
    }
}

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

const KAYAK: &str = "What does it cost to take my kayak on the ferry?";
/// The window's size in points (`WINDOW_SIZE` in main.rs); Xvfb's scale is 1.
const WINDOW: (u32, u32) = (1400, 900);

/// `scar-app` with the test model and its saved state kept in `home`.
fn scar_app(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scar-app"));
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("SCAR_")) {
        command.env_remove(key);
    }
    command
        .env("SCAR_MODELS_DIR", scar_test_support::models_dir())
        .env("SCAR_DEVICE", "cpu")
        .env("HF_HUB_OFFLINE", "1")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"));
    command
}

/// `command` under a fresh X server, or `None` when xvfb-run is missing and not required.
fn under_xvfb(command: &Command) -> Option<Command> {
    if Command::new("xvfb-run").arg("--help").output().is_err() {
        assert!(
            std::env::var_os("SCAR_REQUIRE_XVFB").is_none(),
            "SCAR_REQUIRE_XVFB is set but xvfb-run is missing: install xvfb"
        );
        eprintln!("skipped: xvfb-run is not installed (scripts/test installs it)");
        return None;
    }
    let mut xvfb = Command::new("xvfb-run");
    xvfb.args(["-a", "-s", "-screen 0 1600x1000x24"])
        .arg(command.get_program())
        .args(command.get_args())
        // X11 only: a desktop's Wayland session must not take the window.
        .env_remove("WAYLAND_DISPLAY");
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => xvfb.env(key, value),
            None => xvfb.env_remove(key),
        };
    }
    Some(xvfb)
}

/// Runs `command` to the end (at most five minutes), its stderr kept in `log`.
fn run(mut command: Command, log: &Path) -> ExitStatus {
    let mut child = command
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_mins(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!(
                "{command:?} did not exit:\n{}",
                std::fs::read_to_string(log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Asks the kayak question in `index` (then does what `more` says) and screenshots the window
/// into `png`, under Xvfb: the exit status and stderr, or `None` when there is no display.
fn screenshot(
    home: &Path,
    index: &Path,
    more: &[&str],
    png: &Path,
) -> Option<(ExitStatus, String)> {
    let mut app = scar_app(home);
    app.arg("--index")
        .arg(index)
        .args(["--ask", KAYAK])
        .args(more)
        .arg("--screenshot")
        .arg(png);
    let command = under_xvfb(&app)?;
    let log = home.join("stderr.log");
    let status = run(command, &log);
    Some((status, std::fs::read_to_string(&log).unwrap()))
}

#[test]
fn help_documents_the_screenshot_flags() {
    let home = tempfile::tempdir().unwrap();
    let output = scar_app(home.path()).arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in ["--index <DIR>", "--ask <QUESTION>", "--screenshot <PNG>"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn an_unknown_instruction_set_cap_is_refused_before_the_window_opens() {
    let home = tempfile::tempdir().unwrap();
    // No display is needed: the value is read before eframe starts.
    let output = scar_app(home.path())
        .env("SCAR_MAX_CPU_ISA", "sse")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .contains("SCAR_MAX_CPU_ISA=\"sse\" names no instruction set: use avx2, avx512 or amx"),
        "{stderr}"
    );
}

#[test]
fn a_screenshot_run_shows_the_decisions_in_a_real_window() {
    let home = tempfile::tempdir().unwrap();
    let png = home.path().join("decisions.png");
    let Some((status, stderr)) =
        screenshot(home.path(), scar_test_support::example_index(), &[], &png)
    else {
        return;
    };
    assert!(status.success(), "scar-app failed:\n{stderr}");
    assert_drawn(&png);
}

#[test]
fn a_screenshot_run_can_hold_a_conversation_first() {
    let home = tempfile::tempdir().unwrap();
    let png = home.path().join("conversation.png");
    let more = ["--answer", "--ask", "And for a car?"];
    let Some((status, stderr)) =
        screenshot(home.path(), scar_test_support::example_index(), &more, &png)
    else {
        return;
    };
    assert!(status.success(), "scar-app failed:\n{stderr}");
    assert_drawn(&png);
}

/// Checks that `png` is a whole window with something drawn in it.
fn assert_drawn(png: &Path) {
    let image = image::open(png).unwrap().to_rgba8();
    assert_eq!(image.dimensions(), WINDOW);
    let colours: HashSet<[u8; 4]> = image.pixels().map(|p| p.0).collect();
    assert!(colours.len() > 100, "only {} colours", colours.len());
    let luma: Vec<f64> = image
        .pixels()
        .map(|p| 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]))
        .collect();
    let mean = luma.iter().sum::<f64>() / luma.len() as f64;
    let variance = luma.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / luma.len() as f64;
    assert!(
        variance > 100.0,
        "the window is nearly uniform: variance {variance:.1}"
    );
}

#[test]
fn a_screenshot_run_without_decisions_fails_and_says_why() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-such-index");
    let png = home.path().join("nothing.png");
    let Some((status, stderr)) = screenshot(home.path(), &missing, &[], &png) else {
        return;
    };
    assert!(!status.success());
    assert!(stderr.contains("no decisions to capture"), "{stderr}");
    // The reason names the index that could not be opened.
    assert!(stderr.contains("no-such-index"), "{stderr}");
    assert!(!png.exists());
}

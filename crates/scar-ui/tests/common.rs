use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use scar_policy::PolicyKind;
use scar_retrieve::FirstStage;
use scar_ui::{Controls, DeviceChoice, Environment, FileDialogs, Precision, ScarApp, Settings};

/// Its evidence straddles chunks 3 and 4 of ferry-handbook.md.
pub const KAYAK: &str = "What does it cost to take my kayak on the ferry?";
pub use scar_test_support::{MINILM as MODEL, example_index, workspace};

pub fn environment(library_dir: &Path) -> Environment {
    Environment {
        models_dir: scar_test_support::models_dir(),
        model: MODEL.to_owned(),
        device: DeviceChoice::Cpu,
        // f32 on every CPU: the snapshots show scores, and must look alike with and without bf16.
        precision: Precision::F32,
        library_dir: library_dir.to_owned(),
        ..Environment::default()
    }
}

/// A path the viewer was asked to open, with the page asked for.
pub type Opened = (PathBuf, Option<u32>);

/// Dialogs that answer with fixed paths, as a user would pick them, and a viewer that notes
/// what it was asked to open.
#[derive(Default)]
pub struct Picks {
    pub folder: Option<PathBuf>,
    pub save_path: Option<PathBuf>,
    pub opened: Arc<Mutex<Vec<Opened>>>,
}

impl FileDialogs for Picks {
    fn pick_folder(&self, _title: &str) -> Option<PathBuf> {
        self.folder.clone()
    }

    fn pick_save_path(&self, _file_name: &str) -> Option<PathBuf> {
        self.save_path.clone()
    }

    fn open_path(&self, path: &Path, page: Option<u32>) -> std::io::Result<()> {
        self.opened.lock().unwrap().push((path.to_owned(), page));
        Ok(())
    }
}

/// The app in a window of the size `scar-app` opens.
pub fn harness(app: ScarApp) -> Harness<'static, ScarApp> {
    Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ScarApp| app.ui(ui), app)
}

/// A first start: an empty library kept under `library/indexes`, the folder dialog answering
/// `folder`, two frames drawn.
pub fn first_start(library: &Path, folder: Option<PathBuf>) -> Harness<'static, ScarApp> {
    let picks = Picks {
        folder,
        ..Picks::default()
    };
    let app = ScarApp::new(
        Settings::default(),
        environment(&library.join("indexes")),
        picks,
    );
    let mut harness = harness(app);
    harness.run_steps(2);
    harness
}

/// A folder `name` under `library` holding the example's ferry handbook.
pub fn folder_with_handbook(library: &Path, name: &str) -> PathBuf {
    let folder = library.join(name);
    std::fs::create_dir(&folder).unwrap();
    let handbook = workspace().join("assets/example/ferry-handbook.md");
    std::fs::copy(handbook, folder.join("ferry-handbook.md")).unwrap();
    folder
}

/// The default controls with one seed: ¶3 of ferry-handbook.md for the kayak question.
pub fn one_seed() -> Controls {
    Controls {
        k: 1,
        ..Controls::default()
    }
}

/// The paper's SCAR ±1 over one dense seed.
pub fn papers_scar() -> Controls {
    Controls {
        k: 1,
        first_stage: FirstStage::Dense,
        ..Controls::default().with_policy(PolicyKind::Scar)
    }
}

/// The app on the example index with `controls`, the kayak question asked and its evidence
/// shown.
pub fn asked_kayak(controls: Controls, library_dir: &Path) -> Harness<'static, ScarApp> {
    let settings = Settings {
        controls,
        ..Settings::default()
    };
    asked_kayak_with(settings, library_dir)
}

/// The app on the example index with `settings`, the kayak question asked and its evidence
/// shown.
pub fn asked_kayak_with(settings: Settings, library_dir: &Path) -> Harness<'static, ScarApp> {
    let picks = Picks::default();
    let mut app = ScarApp::new(settings, environment(library_dir), picks);
    app.open_index(example_index());
    app.ask(KAYAK);
    let mut harness = harness(app);
    settle(&mut harness);
    harness
}

/// Clicks *Answer* and steps the UI until the answer has ended, in an answer or an error.
pub fn answer_and_wait(harness: &mut Harness<'_, ScarApp>) {
    harness
        .get_by_role_and_label(Role::Button, "Answer")
        .click();
    harness.run_steps(1);
    step_until(harness, |harness| !harness.state().is_answering());
    harness.run_steps(3);
}

/// Steps the UI until the workers have delivered everything it asked for.
pub fn settle(harness: &mut Harness<'_, ScarApp>) {
    harness.step();
    step_until(harness, |harness| !harness.state().is_busy());
    // Lay out what arrived (egui may take a second pass for new content).
    harness.run_steps(3);
}

/// Steps the UI until `done`, which sees the harness after each step.
pub fn step_until(
    harness: &mut Harness<'_, ScarApp>,
    mut done: impl FnMut(&Harness<'_, ScarApp>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_mins(3);
    while !done(harness) {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(20));
        harness.step();
    }
}

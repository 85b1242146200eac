//! `scar-app`: the SCAR desktop app, scar-ui in an eframe window with native file dialogs.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::Parser;
use eframe::egui;
use scar_ui::{
    DEFAULT_CROSS_ENCODER, DeviceChoice, Environment, FileDialogs, Location, Precision, Reranking,
    ScarApp, Settings,
};

mod viewer;

// candle allocates and frees large tensors at a high rate; glibc's malloc turns that into
// kernel time (docs/PERFORMANCE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The name eframe stores settings under, and the data folder's name.
const APP_ID: &str = "scar";
/// The window's inner size in points; a screenshot has this size times the display's scale.
const WINDOW_SIZE: [f32; 2] = [1400.0, 900.0];

/// Ask your documents, and see every expansion decision with its scores.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Open this index (adding it to the library)
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    index: Option<PathBuf>,
    /// Open this PostgreSQL store, which `scar index --store` writes (adding it to the
    /// library): postgres://USER@HOST:PORT/DB
    #[arg(long, env = "SCAR_STORE", value_name = "URL", hide_env_values = true)]
    store: Option<String>,
    /// Ask this question once the index is open; given again, the next one is asked once the
    /// last has its evidence (with --answer, its answer), as a conversation continues
    #[arg(long, value_name = "QUESTION")]
    ask: Vec<String>,
    /// Answer each question asked with --ask with the chat model before the next
    #[arg(long)]
    answer: bool,
    /// Once the decisions are shown, save the window as a PNG and exit. Such a run starts from
    /// the default settings and saves none, so that it looks the same wherever it runs.
    #[arg(long, value_name = "PNG")]
    screenshot: Option<PathBuf>,
    /// Where models are installed
    #[arg(long, env = "SCAR_MODELS_DIR", default_value = "models")]
    models_dir: PathBuf,
    /// Embedding model for new indexes: hub id, short name or folder
    #[arg(long, env = "SCAR_MODEL", default_value = "BAAI/bge-large-en-v1.5")]
    model: String,
    /// cpu, cuda, cuda:N or auto
    #[arg(long, env = "SCAR_DEVICE", default_value = "auto")]
    device: DeviceChoice,
    /// Embedding precision: auto, f32, bf16, int8 or f16
    #[arg(long, env = "SCAR_PRECISION", default_value = "auto")]
    precision: Precision,
    /// Where the indexes of added folders are kept [default: `indexes` in the app's data folder]
    #[arg(long, env = "SCAR_LIBRARY", value_name = "DIR")]
    library: Option<PathBuf>,
    /// Judge each question's best 30 candidates again: none, sentence, llm (the default chat
    /// model's probability of "yes"), likelihood (how much likelier that model finds the
    /// question after the candidate) or cross-encoder (--reranker)
    #[arg(long, env = "SCAR_RERANK", default_value = "none")]
    rerank: Reranking,
    /// Cross-encoder for `--rerank cross-encoder`: hub id or folder
    #[arg(
        long,
        env = "SCAR_RERANKER",
        default_value = DEFAULT_CROSS_ENCODER
    )]
    reranker: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    // The kernels would read a cap they cannot parse as none; say so before the window opens.
    scar_ui::max_isa()?;
    let store = args.store.as_deref().map(Location::store).transpose()?;
    let library_dir = args
        .library
        .or_else(|| eframe::storage_dir(APP_ID).map(|dir| dir.join("indexes")))
        .context("no data folder on this system: give the library's folder with --library")?;
    let environment = Environment {
        models_dir: args.models_dir,
        model: args.model,
        device: args.device,
        precision: args.precision,
        library_dir,
        rerank: args.rerank,
        reranker: args.reranker,
    };
    let (outcome, outcomes) = channel();
    let screenshot = args.screenshot.clone();
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("SCAR")
            .with_app_id(APP_ID)
            .with_inner_size(WINDOW_SIZE),
        persist_window: screenshot.is_none(),
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        APP_ID,
        options,
        Box::new(move |cc| {
            let settings = match (&screenshot, cc.storage) {
                (None, Some(storage)) => {
                    eframe::get_value(storage, eframe::APP_KEY).unwrap_or_default()
                }
                _ => Settings::default(),
            };
            let mut app = ScarApp::new(settings, environment, NativeDialogs);
            if let Some(index) = args.index {
                app.open_index(index);
            } else if let Some(store) = store {
                app.open(store);
            }
            Ok(Box::new(Window {
                app,
                script: Script {
                    questions: args.ask.into(),
                    answer: args.answer,
                    answering: false,
                },
                screenshot: screenshot.map(|path| Screenshot::new(path, outcome)),
            }))
        }),
    )
    .map_err(|error| anyhow!("the window failed: {error}"))?;
    if args.screenshot.is_some() {
        outcomes
            .try_recv()
            .unwrap_or_else(|_| Err(anyhow!("the window closed before the screenshot")))?;
    }
    Ok(())
}

struct Window {
    app: ScarApp,
    script: Script,
    screenshot: Option<Screenshot>,
}

/// The questions of `--ask`, asked in turn: each once the app has settled on the last one's
/// evidence and, with `--answer`, its answer.
struct Script {
    questions: VecDeque<String>,
    answer: bool,
    /// The last question's answer has been started.
    answering: bool,
}

impl Script {
    /// Moves the script on when the app is idle; true once every question is done, or once
    /// something failed (asking on would clear the error that says what).
    fn step(&mut self, ctx: &egui::Context, app: &mut ScarApp) -> bool {
        if app.is_busy() || app.is_answering() {
            return false;
        }
        if app.error().is_some() {
            return true;
        }
        if self.answer && !self.answering && app.report().is_some() {
            self.answering = true;
            app.start_answer(ctx);
            return false;
        }
        let Some(question) = self.questions.pop_front() else {
            return true;
        };
        self.answering = false;
        app.ask(question);
        // The next frame starts the work the question asks for.
        ctx.request_repaint();
        false
    }
}

impl eframe::App for Window {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.app.ui(ui);
        let done = self.script.step(ui.ctx(), &mut self.app);
        if let Some(screenshot) = &mut self.screenshot
            && done
        {
            screenshot.after_frame(ui.ctx(), &self.app);
        }
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if self.screenshot.is_none() {
            eframe::set_value(storage, eframe::APP_KEY, self.app.settings());
        }
    }

    fn persist_egui_memory(&self) -> bool {
        self.screenshot.is_none()
    }
}

/// `--screenshot`: waits until the app has settled with decisions on screen, captures the
/// window, writes the PNG and closes the window.
struct Screenshot {
    path: PathBuf,
    /// Frames drawn since the app settled; egui may need a second pass to lay out new content.
    settled_frames: u32,
    capture: Option<Receiver<Arc<egui::ColorImage>>>,
    outcome: Sender<Result<()>>,
}

impl Screenshot {
    const SETTLE_FRAMES: u32 = 3;

    fn new(path: PathBuf, outcome: Sender<Result<()>>) -> Self {
        Self {
            path,
            settled_frames: 0,
            capture: None,
            outcome,
        }
    }

    fn after_frame(&mut self, ctx: &egui::Context, app: &ScarApp) {
        if let Some(capture) = &self.capture {
            if let Ok(image) = capture.try_recv() {
                self.finish(ctx, save_png(&image, &self.path));
            }
            return;
        }
        if app.is_busy() {
            self.settled_frames = 0;
            return;
        }
        if app.report().is_none() {
            let reason = app
                .error()
                .map_or_else(|| "give --index and --ask".to_owned(), ToString::to_string);
            self.finish(ctx, Err(anyhow!("no decisions to capture: {reason}")));
            return;
        }
        self.settled_frames += 1;
        if self.settled_frames == Self::SETTLE_FRAMES {
            let (sender, receiver) = channel();
            let waker = ctx.clone();
            ctx.request_screenshot(move |image| {
                let _ = sender.send(image);
                waker.request_repaint();
            });
            self.capture = Some(receiver);
        }
        ctx.request_repaint();
    }

    fn finish(&self, ctx: &egui::Context, result: Result<()>) {
        let _ = self.outcome.send(result);
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }
}

fn save_png(image: &egui::ColorImage, path: &Path) -> Result<()> {
    let [width, height] = image.size;
    let rgba: Vec<u8> = image
        .pixels
        .iter()
        .flat_map(egui::Color32::to_srgba_unmultiplied)
        .collect();
    if width == 0 || height == 0 {
        bail!("the screenshot is empty");
    }
    image::save_buffer_with_format(
        path,
        &rgba,
        width as u32,
        height as u32,
        image::ExtendedColorType::Rgba8,
        image::ImageFormat::Png,
    )
    .with_context(|| format!("writing the screenshot to {}", path.display()))
}

/// The platform's file dialogs, through rfd.
struct NativeDialogs;

impl FileDialogs for NativeDialogs {
    fn pick_folder(&self, title: &str) -> Option<PathBuf> {
        rfd::FileDialog::new().set_title(title).pick_folder()
    }

    fn pick_save_path(&self, file_name: &str) -> Option<PathBuf> {
        rfd::FileDialog::new()
            .set_file_name(file_name)
            .add_filter("JSON", &["json"])
            .save_file()
    }

    fn open_path(&self, path: &Path, page: Option<u32>) -> std::io::Result<()> {
        viewer::open(path, page)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use eframe::Storage as _;
    use scar_ui::{Controls, LibraryEntry};

    use super::*;

    /// eframe's storage, in memory.
    #[derive(Default)]
    struct Memory(HashMap<String, String>);

    impl eframe::Storage for Memory {
        fn get_string(&self, key: &str) -> Option<String> {
            self.0.get(key).cloned()
        }

        fn set_string(&mut self, key: &str, value: String) {
            self.0.insert(key.to_owned(), value);
        }

        fn remove_string(&mut self, key: &str) {
            self.0.remove(key);
        }

        fn flush(&mut self) {}
    }

    fn load(saved: &str) -> Option<Settings> {
        let mut storage = Memory::default();
        storage.set_string(eframe::APP_KEY, saved.to_owned());
        eframe::get_value(&storage, eframe::APP_KEY)
    }

    /// What the version before the evidence walk saved (eframe writes RON): its own policy
    /// names and `parent_block`.
    const SAVED: &str = r#"(library:[(dir:"/data/contracts",sources:[])],current:Some("/data/contracts"),question:"fees?",controls:(policy:scar,lambda:0.2,gamma:0.7,window:1,parent_block:6,k:3,first_stage:dense),answer:(model:"smollm2",max_tokens:128))"#;

    #[test]
    fn settings_saved_by_an_older_version_load() {
        let settings = load(SAVED).unwrap();
        let folder = Location::Folder(PathBuf::from("/data/contracts"));
        assert_eq!(settings.library[0].location, folder);
        assert_eq!(settings.current, Some(folder));
        assert_eq!(settings.question, "fees?");
        let controls = settings.controls;
        assert_eq!(controls.policy.name(), "scar");
        assert!((controls.gamma - 0.7).abs() < f32::EPSILON);
        assert_eq!((controls.window, controls.block, controls.k), (1, 6, 3));
        assert_eq!(controls.depth, Controls::default().depth);

        // A policy this version does not know reads as the default; nothing else is lost.
        let unknown = load(&SAVED.replace("policy:scar", "policy:sliding_window")).unwrap();
        assert_eq!(unknown.controls.policy, Controls::default().policy);
        assert_eq!(unknown.question, "fees?");

        // What this version saves, it loads: a store beside a folder, too.
        let mut settings = settings;
        let store = Location::store("postgres://scar@127.0.0.1:5432/docs").unwrap();
        settings.library.push(LibraryEntry {
            location: store.clone(),
            sources: Vec::new(),
        });
        settings.current = Some(store);
        let mut storage = Memory::default();
        eframe::set_value(&mut storage, eframe::APP_KEY, &settings);
        assert_eq!(
            eframe::get_value::<Settings>(&storage, eframe::APP_KEY),
            Some(settings)
        );
    }
}

//! The answer panel: an answer streamed from the chat model on the asked question's context,
//! its `[n]` citations as links to their chunks, and what the generation cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use scar_answer::{
    Answer, AnswerPiece, AnswerReport, GenerationParams, Prompt, Question, Source, Turn,
    answer_pieces,
};
use scar_core::{ChunkId, ErrorChain};

use crate::worker::{AnswerJob, AnyRetriever, Worker};
use crate::{AnswerSettings, UiError, file_name};

/// An answer to the report shown, from the click on "Answer" until it is replaced or cleared.
struct Answering {
    /// Tells this answer's events from those of an answer cleared before it.
    id: u64,
    /// The model asked, as the settings named it.
    model: String,
    /// The sources `[n]` refers to, numbered as the prompt numbers them.
    sources: Vec<Source>,
    /// The text so far.
    text: String,
    /// Set by Stop, or when the answer is cleared while it runs.
    cancel: Arc<AtomicBool>,
    /// `None` while generating.
    outcome: Option<Result<Box<AnswerReport>, UiError>>,
}

impl Answering {
    fn is_running(&self) -> bool {
        self.outcome.is_none()
    }
}

/// What the user asked of the answer panel, for the app to carry out.
pub(crate) enum AnswerAction {
    /// Answer the question shown.
    Start,
    /// Show this cited chunk in the seam map and the reader.
    Show(ChunkId),
}

/// The answer to the evidence shown, kept beside it so that the evidence stays what the policy
/// decided.
#[derive(Default)]
pub(crate) struct AnswerPanel {
    answer: Option<Answering>,
    /// Answers started so far, numbering them.
    answers_started: u64,
}

impl AnswerPanel {
    pub fn is_running(&self) -> bool {
        self.answer.as_ref().is_some_and(Answering::is_running)
    }

    /// The finished answer, if one was generated and not cleared.
    pub fn answer(&self) -> Option<&Answer> {
        let report = self.answer.as_ref()?.outcome.as_ref()?.as_ref().ok()?;
        Some(&report.answer)
    }

    /// Starts answering `question` (searched on `retriever`) on the answer thread, in place of
    /// the answer shown.
    pub fn start(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        question: &Question,
        retriever: &Arc<AnyRetriever>,
        settings: &AnswerSettings,
    ) {
        self.clear();
        self.answers_started += 1;
        let id = self.answers_started;
        let model = settings.model.trim().to_owned();
        let cancel = Arc::new(AtomicBool::new(false));
        worker.answer(
            ctx,
            AnswerJob {
                id,
                model: model.clone(),
                question: question.clone(),
                retriever: Arc::clone(retriever),
                params: GenerationParams {
                    max_tokens: settings.max_tokens,
                    ..GenerationParams::default()
                },
                cancel: Arc::clone(&cancel),
            },
        );
        self.answer = Some(Answering {
            id,
            model,
            sources: Prompt::from_report(question.report()).sources,
            text: String::new(),
            cancel,
            outcome: None,
        });
    }

    /// Drops the answer (it no longer matches the evidence), stopping it if it runs.
    pub fn clear(&mut self) {
        if let Some(answering) = self.answer.take() {
            answering.cancel.store(true, Ordering::Relaxed);
        }
    }

    pub fn text(&mut self, id: u64, piece: &str) {
        if let Some(answering) = self.answer.as_mut().filter(|a| a.id == id) {
            answering.text.push_str(piece);
        }
    }

    /// Takes in how answer `id` ended; gives back its text when it was answered, to record as
    /// a turn of the conversation.
    pub fn answered(
        &mut self,
        id: u64,
        result: Result<Box<AnswerReport>, UiError>,
    ) -> Option<String> {
        let answering = self.answer.as_mut().filter(|a| a.id == id)?;
        let text = result
            .as_ref()
            .ok()
            .map(|report| report.answer.generation.text.clone());
        if let Some(text) = &text {
            // Whole, including a piece that arrived as Stop was pressed.
            answering.text.clone_from(text);
        }
        answering.outcome = Some(result);
        text
    }

    /// The panel: the `earlier` turns of the conversation, Answer (with `model`) and Stop, the
    /// answer streaming in and the sources found for it.
    pub fn answer_ui(
        &self,
        ui: &mut egui::Ui,
        model: &str,
        earlier: &[Turn],
    ) -> Option<AnswerAction> {
        ui.add_space(4.0);
        crate::conversation::turns_ui(ui, earlier);
        let mut action = None;
        ui.horizontal(|ui| {
            if ui
                .add_enabled(!self.is_running(), egui::Button::new("Answer"))
                .on_hover_text(format!(
                    "Answer the question from this context with {model}"
                ))
                .clicked()
            {
                action = Some(AnswerAction::Start);
            }
            if let Some(answering) = self.answer.as_ref().filter(|a| a.is_running()) {
                if ui.button("Stop").clicked() {
                    answering.cancel.store(true, Ordering::Relaxed);
                }
                ui.spinner();
                ui.weak(if answering.text.is_empty() {
                    format!("Loading {} and reading the prompt…", answering.model)
                } else {
                    format!("{} is answering…", answering.model)
                });
            } else if self.answer.is_none() {
                ui.weak("Generate an answer from the context below, citing its chunks as [n].");
            }
        });
        if let Some(answering) = &self.answer {
            egui::ScrollArea::vertical()
                .max_height(220.0)
                .auto_shrink([false, true])
                .stick_to_bottom(true)
                .show(ui, |ui| {
                    if let Some(id) = text_ui(ui, &answering.text, &answering.sources) {
                        action = Some(AnswerAction::Show(id));
                    }
                });
            match &answering.outcome {
                Some(Ok(report)) => {
                    if let Some(id) = attribution_ui(ui, &report.answer) {
                        action = Some(AnswerAction::Show(id));
                    }
                    ui.weak(report.summary());
                }
                Some(Err(error)) => {
                    ui.colored_label(
                        ui.visuals().error_fg_color,
                        format!("⚠ {}", ErrorChain(error)),
                    );
                }
                None => {}
            }
        }
        ui.add_space(4.0);
        action
    }
}

/// Each sentence with the source found to support it, as a link marked as found (not cited by
/// the model), a flag where no source holds it, and the model's citations that point
/// elsewhere; returns the chunk of the link clicked.
fn attribution_ui(ui: &mut egui::Ui, answer: &Answer) -> Option<ChunkId> {
    if answer.attribution.is_empty() {
        return None;
    }
    let mut clicked = None;
    egui::CollapsingHeader::new("Sources found for each sentence")
        .default_open(true)
        .show(ui, |ui| {
            for support in &answer.attribution {
                let source = answer.prompt.sources.get(support.source.wrapping_sub(1));
                ui.horizontal_wrapped(|ui| {
                    let shares = format!(
                        "shares {:.0}% of its words with [{}], cos {:.2}",
                        support.shared_words * 100.0,
                        support.source,
                        support.similarity
                    );
                    if support.found {
                        let link = ui
                            .link(format!("found in [{}]", support.source))
                            .on_hover_text(format!(
                                "{shares}; found by comparing, not cited by the model"
                            ));
                        if link.clicked() {
                            clicked = source.map(|s| s.chunk);
                        }
                    } else {
                        ui.colored_label(ui.visuals().warn_fg_color, "not found in the sources")
                            .on_hover_text(shares);
                    }
                    if support.disagrees() {
                        let cited: Vec<String> =
                            support.cited.iter().map(|n| format!("[{n}]")).collect();
                        ui.colored_label(
                            ui.visuals().warn_fg_color,
                            format!("(the model cites {})", cited.join(" ")),
                        );
                    }
                    ui.label(&support.text);
                });
            }
        });
    clicked
}

/// The answer's text with each citation as a link; returns the chunk of the one clicked.
fn text_ui(ui: &mut egui::Ui, text: &str, sources: &[Source]) -> Option<ChunkId> {
    let mut clicked = None;
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 0.0;
        for piece in answer_pieces(text) {
            match piece {
                AnswerPiece::Text(text) => {
                    ui.label(text);
                }
                AnswerPiece::Cite(number) => match sources.get(number.wrapping_sub(1)) {
                    Some(source) => {
                        let hover = format!(
                            "{} {}: open it in the reader",
                            file_name(std::path::Path::new(&source.document)),
                            source.place
                        );
                        if ui
                            .link(format!("[{number}]"))
                            .on_hover_text(hover)
                            .clicked()
                        {
                            clicked = Some(source.chunk);
                        }
                    }
                    None => {
                        ui.colored_label(ui.visuals().warn_fg_color, format!("[{number}]"))
                            .on_hover_text("No source carries this number");
                    }
                },
            }
        }
    });
    clicked
}

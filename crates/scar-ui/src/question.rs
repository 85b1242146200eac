//! The question panel: the question box, a follow-up rewritten to stand alone before it is
//! searched for, and the question's evidence (the comparison with static ±1, the seam map with
//! its reader, the decisions), which the controls re-decide on the cached seeds.

use std::path::PathBuf;
use std::sync::Arc;

use scar_answer::{Question, Turn};
use scar_core::ChunkId;
use scar_retrieve::{Neighbourhood, Prepared, SearchReport};

use crate::conversation;
use crate::worker::{AnyRetriever, Found, RewriteJob, Wish, Worker};
use crate::{Controls, Location, Result, Settings, UiError};

/// The question the evidence shown answers: as asked, and as searched for.
#[derive(Debug, Clone)]
struct Asked {
    question: String,
    standalone: String,
}

/// A follow-up being rewritten on the answer thread.
struct Rewriting {
    id: u64,
    question: String,
    sent: bool,
}

/// One question's seeds, the documents they are in, and what the policies made of them.
struct Evidence {
    wish: Wish,
    prepared: Prepared,
    /// The seeds' documents, read once: the policies decide from them without the store.
    neighbourhood: Neighbourhood,
    /// The policy the controls describe, beside static ±1 on the same seeds.
    question: Question,
}

/// Runs the controls' policy on a question's seeds.
fn decide(
    retriever: &AnyRetriever,
    controls: &Controls,
    wish: Wish,
    found: Found,
) -> Result<Evidence> {
    let Found {
        prepared,
        neighbourhood,
    } = found;
    let question = Question::search_in(retriever, &neighbourhood, &prepared, &controls.options()?)?;
    Ok(Evidence {
        wish,
        prepared,
        neighbourhood,
        question,
    })
}

/// The asked question, from the box to its evidence and the chunk the user is looking at.
#[derive(Default)]
pub(crate) struct QuestionPanel {
    /// The question the user asked (the box may since hold other text), and what is searched
    /// for: the question, or a follow-up rewritten to stand alone.
    asked: Option<Asked>,
    /// A follow-up being rewritten before it is searched for.
    rewriting: Option<Rewriting>,
    /// Rewrites started so far, numbering them.
    rewrites_started: u64,
    /// The asked question's answer is a turn of the conversation already.
    turn_recorded: bool,
    /// A question is being embedded; one at a time.
    preparing: bool,
    prepare_failed: Option<Wish>,
    evidence: Option<Evidence>,
    /// The document shown in the seam map and the chunk open in the reader.
    document: Option<u32>,
    selected: Option<ChunkId>,
}

impl QuestionPanel {
    /// Takes `question` as the next one: searched for as it is when it starts a conversation,
    /// rewritten first when it `follows_up` an answered one.
    pub fn ask(&mut self, question: &str, follows_up: bool) {
        let question = question.trim().to_owned();
        self.turn_recorded = false;
        self.prepare_failed = None;
        if !follows_up || question.is_empty() {
            self.rewriting = None;
            self.asked = Some(Asked {
                standalone: question.clone(),
                question,
            });
        } else {
            self.rewrites_started += 1;
            self.asked = None;
            self.evidence = None;
            self.rewriting = Some(Rewriting {
                id: self.rewrites_started,
                question,
                sent: false,
            });
        }
    }

    /// Sends what waits to the workers: a follow-up to rewrite, and the seeds the question
    /// needs from `retriever`, the current index once it is open.
    pub fn start_work(
        &mut self,
        ctx: &egui::Context,
        worker: &Worker,
        settings: &Settings,
        current: Option<(&Location, &Arc<AnyRetriever>)>,
    ) {
        if let Some(rewriting) = self.rewriting.as_mut().filter(|r| !r.sent) {
            rewriting.sent = true;
            worker.rewrite(
                ctx,
                RewriteJob {
                    id: rewriting.id,
                    model: settings.answer.model.trim().to_owned(),
                    earlier: conversation::current_turns(settings).to_vec(),
                    question: rewriting.question.clone(),
                },
            );
        }
        if let Some((retriever, wish)) = self.question_to_prepare(current, &settings.controls) {
            self.preparing = true;
            worker.prepare(ctx, retriever, wish);
        }
    }

    /// True while a follow-up is rewritten or the question is, or is about to be, embedded.
    pub fn is_busy(
        &self,
        current: Option<(&Location, &Arc<AnyRetriever>)>,
        controls: &Controls,
    ) -> bool {
        self.preparing
            || self.question_to_prepare(current, controls).is_some()
            || self.rewriting.is_some()
    }

    pub fn is_preparing(&self) -> bool {
        self.preparing
    }

    pub fn is_rewriting(&self) -> bool {
        self.rewriting.is_some()
    }

    pub fn has_asked(&self) -> bool {
        self.asked.is_some()
    }

    /// What the policy decided for the asked question, once it has arrived.
    pub fn report(&self) -> Option<&SearchReport> {
        self.searched().map(Question::report)
    }

    /// The asked question as searched, which its answer is generated from.
    pub fn searched(&self) -> Option<&Question> {
        self.evidence.as_ref().map(|evidence| &evidence.question)
    }

    /// The chunk open in the reader.
    pub fn selected(&self) -> Option<ChunkId> {
        self.selected
    }

    /// The seeds the asked question needs under `controls` from the entry at `index`.
    fn wish(&self, index: &Location, controls: &Controls) -> Option<Wish> {
        Some(Wish {
            index: index.clone(),
            query: self.asked.as_ref()?.standalone.clone(),
            first_stage: controls.first_stage,
            k: controls.k,
        })
    }

    /// The wish, unless it is fulfilled, failed, or a question is being embedded (one at a
    /// time: while the user drags k, only the latest value is worth embedding).
    fn question_to_prepare(
        &self,
        current: Option<(&Location, &Arc<AnyRetriever>)>,
        controls: &Controls,
    ) -> Option<(Arc<AnyRetriever>, Wish)> {
        let (index, retriever) = current?;
        let wish = self.wish(index, controls)?;
        let fulfilled = self.evidence.as_ref().is_some_and(|e| e.wish == wish);
        if fulfilled || self.preparing || self.prepare_failed.as_ref() == Some(&wish) {
            return None;
        }
        Some((Arc::clone(retriever), wish))
    }

    /// Runs the controls' policy on the seeds prepared for `wish`, opening the first seed in
    /// the reader. `None` when the result is for an older wish: the current one is sent next
    /// frame.
    pub fn prepared(
        &mut self,
        current: Option<(&Location, &Arc<AnyRetriever>)>,
        controls: &Controls,
        wish: Wish,
        result: Result<Found>,
    ) -> Option<Result<()>> {
        self.preparing = false;
        let (index, retriever) = current?;
        if self.wish(index, controls).as_ref() != Some(&wish) {
            return None;
        }
        let decided = result.and_then(|found| decide(retriever, controls, wish.clone(), found));
        Some(match decided {
            Ok(evidence) => {
                let first_seed = evidence
                    .question
                    .report()
                    .ledger
                    .seeds
                    .first()
                    .map(|s| s.id);
                self.evidence = Some(evidence);
                if let Some(seed) = first_seed {
                    self.select_chunk(seed);
                }
                Ok(())
            }
            Err(error) => {
                self.prepare_failed = Some(wish);
                Err(error)
            }
        })
    }

    /// Re-runs the policy on the cached seeds, embeddings and rankings: no model involved.
    /// `None` when there is no evidence.
    pub fn decide_again(
        &mut self,
        retriever: &AnyRetriever,
        controls: &Controls,
    ) -> Option<Result<()>> {
        let evidence = self.evidence.as_mut()?;
        let question = controls
            .options()
            .map_err(UiError::from)
            .and_then(|options| {
                Ok(Question::search_in(
                    retriever,
                    &evidence.neighbourhood,
                    &evidence.prepared,
                    &options,
                )?)
            });
        Some(question.map(|question| evidence.question = question))
    }

    /// Drops the evidence, which came from an index that is closed or changed.
    pub fn clear_evidence(&mut self) {
        self.evidence = None;
        self.document = None;
        self.selected = None;
    }

    /// Shows chunk `id` (of the seeds' documents) in the seam map and opens it in the reader.
    pub fn select_chunk(&mut self, id: ChunkId) {
        let read = self
            .evidence
            .as_ref()
            .and_then(|e| e.neighbourhood.chunk(id));
        if let Some(read) = read {
            self.document = Some(read.chunk.slot);
            self.selected = Some(id);
        }
    }

    /// The rewritten follow-up is searched for; if the chat model failed, the question as asked
    /// is, and the error comes back to say why.
    pub fn rewritten(&mut self, id: u64, result: Result<String>) -> Option<UiError> {
        let rewriting = self.rewriting.take_if(|r| r.id == id)?;
        let (standalone, error) = match result {
            Ok(standalone) => (standalone, None),
            Err(error) => (rewriting.question.clone(), Some(error)),
        };
        self.asked = Some(Asked {
            question: rewriting.question,
            standalone,
        });
        error
    }

    /// Records `answer` to the asked question as a turn of the current conversation;
    /// answering the same evidence again replaces the turn's answer.
    pub fn record_turn(&mut self, settings: &mut Settings, answer: &str) {
        let Some(asked) = self.asked.clone() else {
            return;
        };
        let turn = Turn {
            question: asked.question,
            standalone: asked.standalone,
            answer: answer.to_owned(),
        };
        conversation::record_turn(settings, turn, self.turn_recorded);
        self.turn_recorded = true;
    }

    /// The turns of `conversation` before the asked question's own, once that is recorded.
    pub fn earlier_turns<'t>(&self, conversation: &'t [Turn]) -> &'t [Turn] {
        match (conversation.last(), &self.asked) {
            (Some(last), Some(asked))
                if self.turn_recorded && last.standalone == asked.standalone =>
            {
                &conversation[..conversation.len() - 1]
            }
            _ => conversation,
        }
    }

    /// The question box, editing `text`, and under it what a follow-up was searched for; a
    /// spinner while `loading` an index or embedding. True when the user asked `text`, which
    /// `follows_up` an answered question or not; `model` rewrites a follow-up.
    pub fn question_ui(
        &mut self,
        ui: &mut egui::Ui,
        text: &mut String,
        follows_up: bool,
        model: &str,
        loading: bool,
    ) -> bool {
        let mut asked = false;
        ui.add_space(6.0);
        ui.horizontal(|ui| {
            ui.heading("SCAR");
            let ask_width = 60.0;
            let edit = egui::TextEdit::singleline(text)
                .hint_text("Ask your documents a question, then press Enter")
                .desired_width(ui.available_width() - ask_width - 40.0);
            let response = ui.add(edit);
            let entered = response.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let clicked = ui
                .add_sized([ask_width, 20.0], egui::Button::new("Ask"))
                .clicked();
            if entered || clicked {
                self.ask(text, follows_up);
                asked = true;
            }
            if loading || self.preparing {
                ui.spinner();
            }
        });
        self.rewrite_ui(ui, model);
        ui.add_space(4.0);
        asked
    }

    /// Under the question box: what a follow-up was searched for, or that it is being
    /// rewritten.
    fn rewrite_ui(&self, ui: &mut egui::Ui, model: &str) {
        if self.rewriting.is_some() {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.weak(format!(
                    "Rewriting the follow-up to stand alone with {model}…"
                ));
            });
        } else if let Some(asked) = self.asked.as_ref().filter(|a| a.standalone != a.question) {
            ui.label(format!("Searched for: {}", asked.standalone))
                .on_hover_text("The follow-up, rewritten from the conversation by the chat model");
        }
    }

    /// The evidence, or what to do to get some (`has_index`: an index or store is chosen);
    /// gives back the file (and page) or folder the user asked to open.
    pub fn evidence_ui(
        &mut self,
        ui: &mut egui::Ui,
        has_index: bool,
    ) -> Option<(PathBuf, Option<u32>)> {
        let Some(evidence) = &self.evidence else {
            ui.centered_and_justified(|ui| {
                ui.weak(if has_index {
                    "Ask a question: each seed, each neighbour considered, and why it was \
                     accepted or rejected will show here."
                } else {
                    "Add a folder to the library to start."
                });
            });
            return None;
        };
        let read = &evidence.neighbourhood;
        let report = evidence.question.report();
        crate::decisions::comparison_ui(ui, report);
        ui.separator();
        let open =
            crate::seam_map::seam_map_ui(ui, read, report, &mut self.document, &mut self.selected);
        ui.separator();
        if let Some(id) = crate::decisions::decisions_ui(ui, read, report, &evidence.prepared) {
            self.select_chunk(id);
        }
        open
    }
}

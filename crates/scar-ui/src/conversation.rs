//! Conversations: every answered question is a turn of the current conversation, a follow-up
//! is rewritten by the chat model into a question that stands alone (shown to the user) before
//! it is searched for, and past conversations are listed to be reopened.

use scar_answer::Turn;

use crate::worker::RewriteJob;
use crate::{Conversation, ScarApp, UiError};

/// A follow-up being rewritten on the answer thread.
pub(crate) struct Rewriting {
    id: u64,
    question: String,
    sent: bool,
}

/// The question the evidence shown answers: as asked, and as searched for.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub question: String,
    pub standalone: String,
}

impl ScarApp {
    /// The turns of the conversation a follow-up continues.
    #[must_use]
    pub fn conversation(&self) -> &[Turn] {
        self.settings
            .conversation
            .and_then(|n| self.settings.conversations.get(n))
            .map_or(&[], |conversation| conversation.turns.as_slice())
    }

    /// True while a follow-up is being rewritten to stand alone.
    #[must_use]
    pub fn is_rewriting(&self) -> bool {
        self.rewriting.is_some()
    }

    /// The next question starts a new conversation.
    pub fn new_conversation(&mut self) {
        self.settings.conversation = None;
    }

    /// Follow-ups continue conversation `n` of [`Settings::conversations`](crate::Settings).
    pub fn reopen_conversation(&mut self, n: usize) {
        if n < self.settings.conversations.len() {
            self.settings.conversation = Some(n);
        }
    }

    /// Takes `question` as the next one: searched for as it is when it starts a conversation,
    /// rewritten first when it follows up.
    pub(crate) fn take_question(&mut self, question: String) {
        self.turn_recorded = false;
        if self.conversation().is_empty() || question.is_empty() {
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

    /// Sends the follow-up waiting to be rewritten to the answer thread.
    pub(crate) fn start_rewrite(&mut self, ctx: &egui::Context) {
        let earlier = self.conversation().to_vec();
        let model = self.settings.answer.model.trim().to_owned();
        let Some(rewriting) = self.rewriting.as_mut().filter(|r| !r.sent) else {
            return;
        };
        rewriting.sent = true;
        self.worker.rewrite(
            ctx,
            RewriteJob {
                id: rewriting.id,
                model,
                earlier,
                question: rewriting.question.clone(),
            },
        );
    }

    /// The rewritten follow-up is searched for; if the chat model failed, the question as asked
    /// is, and the error says why.
    pub(crate) fn rewritten(&mut self, id: u64, result: Result<String, UiError>) {
        let Some(rewriting) = self.rewriting.take_if(|r| r.id == id) else {
            return;
        };
        let standalone = match result {
            Ok(standalone) => standalone,
            Err(error) => {
                self.error = Some(error);
                rewriting.question.clone()
            }
        };
        self.asked = Some(Asked {
            question: rewriting.question,
            standalone,
        });
    }

    /// Records an answer to the asked question as a turn of the current conversation (a new
    /// one when there is none); answering the same evidence again replaces the turn's answer.
    pub(crate) fn record_turn(&mut self, answer: &str) {
        let Some(asked) = self.asked.clone() else {
            return;
        };
        let turn = Turn {
            question: asked.question,
            standalone: asked.standalone,
            answer: answer.to_owned(),
        };
        let conversations = &mut self.settings.conversations;
        let n = match self.settings.conversation {
            Some(n) if n < conversations.len() => n,
            _ => {
                conversations.push(Conversation::default());
                conversations.len() - 1
            }
        };
        self.settings.conversation = Some(n);
        let turns = &mut conversations[n].turns;
        match turns.last_mut() {
            Some(last) if self.turn_recorded && last.standalone == turn.standalone => {
                last.answer = turn.answer;
            }
            _ => turns.push(turn),
        }
        self.turn_recorded = true;
    }

    /// Under the question box: what a follow-up was searched for, or that it is being
    /// rewritten.
    pub(crate) fn rewrite_ui(&self, ui: &mut egui::Ui) {
        if self.rewriting.is_some() {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.weak(format!(
                    "Rewriting the follow-up to stand alone with {}…",
                    self.settings.answer.model
                ));
            });
        } else if let Some(asked) = self.asked.as_ref().filter(|a| a.standalone != a.question) {
            ui.label(format!("Searched for: {}", asked.standalone))
                .on_hover_text("The follow-up, rewritten from the conversation by the chat model");
        }
    }

    /// The earlier turns of the current conversation, above the answer.
    pub(crate) fn turns_ui(&self, ui: &mut egui::Ui) {
        let turns = self.conversation();
        let shown = match (turns.last(), &self.asked) {
            // The last turn is the answer shown below, once it is recorded.
            (Some(last), Some(asked))
                if self.turn_recorded && last.standalone == asked.standalone =>
            {
                &turns[..turns.len() - 1]
            }
            _ => turns,
        };
        if shown.is_empty() {
            return;
        }
        egui::CollapsingHeader::new(format!("Earlier in this conversation ({})", shown.len()))
            .default_open(false)
            .show(ui, |ui| {
                for turn in shown {
                    ui.strong(&turn.question);
                    ui.label(&turn.answer);
                    ui.add_space(4.0);
                }
            });
    }

    /// The conversations list, in the library panel: the current one marked, each reopenable.
    pub(crate) fn conversations_ui(&mut self, ui: &mut egui::Ui) {
        if self.settings.conversations.is_empty() {
            return;
        }
        ui.separator();
        ui.horizontal(|ui| {
            ui.strong("Conversations");
            if ui
                .add_enabled(
                    self.settings.conversation.is_some(),
                    egui::Button::new("New").small(),
                )
                .on_hover_text("The next question starts a new conversation")
                .clicked()
            {
                self.new_conversation();
            }
        });
        let mut reopen = None;
        for (n, conversation) in self.settings.conversations.iter().enumerate().rev() {
            let current = self.settings.conversation == Some(n);
            let label = format!("{} ({})", conversation.title(), conversation.turns.len());
            if ui
                .add(egui::Button::selectable(current, label).truncate())
                .on_hover_text("Continue this conversation")
                .clicked()
            {
                reopen = Some(n);
            }
        }
        if let Some(n) = reopen {
            self.reopen_conversation(n);
        }
    }
}

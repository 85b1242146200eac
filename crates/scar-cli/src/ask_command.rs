//! `scar ask "question"`: the context SCAR chose, answered by a chat model that cites it.

use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

use anyhow::Result;
use console::style;
use scar_answer::{
    Answer, Generator, LlmLocator, LoadOptions, LocalModel, Question, RemoteModel, RemoteOptions,
};

use crate::search_command::{open_retriever, short};
use crate::settings::Settings;
use crate::terminal::inert;

pub fn run(settings: &Settings, query: &str, json: bool) -> Result<ExitCode> {
    let options = settings.policy()?;
    // The chat model first: a bad server URL or model file is reported before the search.
    let mut generator = open_generator(settings)?;
    let retriever = open_retriever(settings)?;
    let prepared = retriever.prepare(query, settings.first_stage.value, settings.k.value)?;
    let question = Question::search(&retriever, &prepared, &options)?;
    let params = settings.generation_params();
    if !json {
        outln!(
            "{} {}",
            style("question:").bold(),
            inert(&question.report().query)
        );
        outln!("{}\n", style(question.report().comparison()).dim());
    }
    let mut stdout = std::io::stdout();
    let mut write_error = None;
    let report = question.answer(generator.as_mut(), &retriever, &params, &mut |piece| {
        if json {
            return ControlFlow::Continue(());
        }
        match write!(stdout, "{}", inert(piece)).and_then(|()| stdout.flush()) {
            Ok(()) => ControlFlow::Continue(()),
            // Nobody reads the answer any more (a closed pipe): stop generating it.
            Err(error) => {
                write_error = Some(error);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(error) = write_error {
        return Err(error.into());
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_sources(&report.answer)?;
        print_attribution(&report.answer)?;
        outln!("{}", style(report.summary()).dim());
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn open_generator(settings: &Settings) -> Result<Box<dyn Generator>> {
    if let Some(url) = &settings.llm_url.value {
        let options = RemoteOptions {
            api_key: std::env::var("SCAR_LLM_API_KEY").ok(),
            allow_remote_host: settings.allow_remote_host.value,
            ..RemoteOptions::new(url.clone(), settings.llm_model.value.clone())
        };
        return Ok(Box::new(RemoteModel::new(options)?));
    }
    let path = LlmLocator::from_env(&settings.models_dir.value).locate(&settings.llm.value)?;
    let options = LoadOptions {
        device: settings.device.value,
        ..LoadOptions::default()
    };
    Ok(Box::new(LocalModel::load(&path, &options)?))
}

fn print_sources(answer: &Answer) -> Result<()> {
    outln!("\n\n{}", style("sources").bold().underlined());
    for source in &answer.prompt.sources {
        let cited = answer.citations.cited.contains(source);
        let mark = if cited {
            style("cited").green().to_string()
        } else {
            style("not cited").dim().to_string()
        };
        outln!(
            "[{}] {} {}  {mark}",
            source.number,
            inert(short(&source.document)),
            inert(&source.place)
        );
    }
    if !answer.citations.unknown.is_empty() {
        let numbers: Vec<String> = answer
            .citations
            .unknown
            .iter()
            .map(|n| format!("[{n}]"))
            .collect();
        outln!(
            "{}",
            style(format!(
                "the answer cites {}, which no source carries",
                numbers.join(" ")
            ))
            .yellow()
        );
    }
    Ok(())
}

/// Each sentence with the source found to support it: found by SCAR from the words and the
/// embedding it shares with the chunk, not written by the model.
fn print_attribution(answer: &Answer) -> Result<()> {
    if answer.attribution.is_empty() {
        return Ok(());
    }
    outln!(
        "\n{} {}",
        style("sentences").bold().underlined(),
        style(
            "(sources found by comparing each sentence with the context, not cited by the model)"
        )
        .dim()
    );
    for support in &answer.attribution {
        let shares = format!(
            "shares {:.0}% of its words, cos {:.2}",
            support.shared_words * 100.0,
            support.similarity
        );
        let verdict = if support.found {
            style(format!("found in [{}] ({shares})", support.source))
                .green()
                .to_string()
        } else {
            style(format!(
                "not found in the sources (closest [{}]: {shares})",
                support.source
            ))
            .yellow()
            .to_string()
        };
        outln!("  {}\n    {verdict}", inert(&support.text));
        if support.disagrees() {
            let cited: Vec<String> = support.cited.iter().map(|n| format!("[{n}]")).collect();
            outln!(
                "    {}",
                style(format!(
                    "the model cites {}, but the sentence reads as [{}]",
                    cited.join(" "),
                    support.source
                ))
                .yellow()
            );
        }
    }
    Ok(())
}

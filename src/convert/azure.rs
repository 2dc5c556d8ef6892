//! Azure LLM inference traces (Azure/AzurePublicDataset), 2023 and 2024:
//! `TIMESTAMP,ContextTokens,GeneratedTokens`.
//!
//! 2023 times are naive with seven fraction digits (taken as UTC, said
//! once); 2024 times carry `+00:00` and sometimes no fraction. Files from
//! Windows have CRLF line endings. There is no prompt: no `hash_ids`.

use std::io::BufRead;
use std::sync::Arc;

use super::fields::{cell_count, cell_datetime};
use super::{Ctx, Head, Request, container};
use crate::error::Result;

/// Azure's CSV header.
pub fn sniff(head: &Head) -> bool {
    head.has_columns(&["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
}

/// Read an Azure trace CSV.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_row(
        reader,
        source,
        ctx,
        |h| {
            Ok([
                h.need("TIMESTAMP")?,
                h.need("ContextTokens")?,
                h.need("GeneratedTokens")?,
            ])
        },
        |ctx, loc, &[t, input, output], row| {
            let parsed = (|| {
                let time = cell_datetime("TIMESTAMP", &row[t])?;
                let input = cell_count("ContextTokens", &row[input])?;
                let output = cell_count("GeneratedTokens", &row[output])?;
                Ok((time, input, output))
            })();
            let (time, input, output) = match parsed {
                Ok(v) => v,
                Err(e) => return ctx.bad(crate::error::FieldError::at(e, loc)),
            };
            if !time.has_zone {
                ctx.naive_time(loc, "TIMESTAMP", row[t].trim());
            }
            let mut req = Request::new(loc.clone(), time.epoch_ns);
            req.input_length = Some(input);
            req.output_length = output;
            ctx.push(req)
        },
    )
}

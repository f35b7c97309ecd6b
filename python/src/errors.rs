//! Rust errors as Python exceptions: `dspk.DspkError` (a `RuntimeError`) carrying the error
//! and its chain of causes, with a Python exception that caused it (raised in a recording's
//! `get_traces`, say) as its `__cause__`.

use std::error::Error;
use std::sync::Arc;

use pyo3::prelude::*;

pyo3::create_exception!(
    dspk,
    DspkError,
    pyo3::exceptions::PyRuntimeError,
    "An error of dspk: what failed, then one `caused by:` line per cause."
);

/// `error` and its causes as the `dspk` command reports them, without the `error: ` prefix:
/// the message, then `  caused by: ...` lines.
pub(crate) fn message(error: &(dyn Error + 'static)) -> String {
    let report = dspk_cli::report::error_report(error);
    report
        .strip_prefix("error: ")
        .unwrap_or(&report)
        .trim_end()
        .to_string()
}

/// `error` as a [`DspkError`] with [`message`]; the first Python exception in its chain of
/// causes becomes the exception's `__cause__`.
pub(crate) fn dspk_error(error: &(dyn Error + 'static)) -> PyErr {
    let raised = DspkError::new_err(message(error));
    let mut cause = Some(error);
    while let Some(inner) = cause {
        // A source's cause is kept in an `Arc` (`dspk::Error::Source`), whose `Error` impl
        // stands for the error inside.
        let shared = inner.downcast_ref::<Arc<dyn Error + Send + Sync>>();
        let python = match shared {
            Some(shared) => (&**shared as &(dyn Error + 'static)).downcast_ref::<PyErr>(),
            None => inner.downcast_ref::<PyErr>(),
        };
        if let Some(python) = python {
            Python::attach(|py| raised.set_cause(py, Some(python.clone_ref(py))));
            break;
        }
        cause = inner.source();
    }
    raised
}

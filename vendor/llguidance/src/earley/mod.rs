mod from_guidance;
mod grammar;
pub(crate) mod lexer;
mod parser;
mod slicer;

pub mod lexerspec;
pub mod perf;
pub mod regexvec;

pub use from_guidance::ValidationResult;
#[allow(unused_imports)]
pub use grammar::{
    BitIdx, CGrammar, CSymIdx, Grammar, ParamCond, ParamExpr, ParamRef, ParamValue, SymIdx,
    SymbolProps,
};
pub use parser::{BiasComputer, Parser, ParserError, ParserMetrics, ParserRecognizer, ParserStats};
pub use slicer::SlicedBiasComputer;

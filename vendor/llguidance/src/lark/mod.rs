mod ast;
mod common;
mod compiler;
mod lexer;
mod parser;

pub use compiler::lark_to_llguidance;

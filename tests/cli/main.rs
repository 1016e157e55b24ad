mod analyze;
mod example;
mod http;
mod preflight;
mod resume;
mod run;
mod schema;
mod validate;

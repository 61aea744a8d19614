use criterion::Criterion;

pub fn benches(_c: &mut Criterion) {}

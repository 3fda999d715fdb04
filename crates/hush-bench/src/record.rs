use serde_json::{Map, Value};

/// One benchmark result: an ordered flat JSON object.
#[derive(Clone, Debug, Default)]
pub struct Record(pub Map<String, Value>);

impl Record {
    pub fn new(bench: &str) -> Self {
        let mut r = Record(Map::new());
        r.set("bench", bench);
        r
    }
    pub fn set(&mut self, k: &str, v: impl Into<Value>) -> &mut Self {
        self.0.insert(k.to_string(), v.into());
        self
    }
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k)
    }
    pub fn f64(&self, k: &str) -> f64 {
        self.0.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN)
    }
    /// One line of JSON.
    pub fn json(&self) -> String {
        Value::Object(self.0.clone()).to_string()
    }
    /// A two-column human table.
    pub fn table(&self) -> String {
        let w = self.0.keys().map(|k| k.len()).max().unwrap_or(0);
        let mut s = String::new();
        for (k, v) in &self.0 {
            let vs = match v {
                Value::String(x) => x.clone(),
                Value::Number(n) => match n.as_f64() {
                    Some(f) if n.is_f64() => fmt_f(f),
                    _ => n.to_string(),
                },
                other => other.to_string(),
            };
            s.push_str(&format!("  {k:<w$}  {vs}\n"));
        }
        s
    }
}

fn fmt_f(f: f64) -> String {
    if f == 0.0 {
        "0".into()
    } else if f.abs() >= 1e6 {
        format!("{f:.4e}")
    } else if f.abs() >= 100.0 {
        format!("{f:.1}")
    } else {
        format!("{f:.4}")
    }
}

// grpo-code's Rust harness (docs/languages.md): the payload on fd 4 (the nonce, then one
// JSON object), the report on fd 3, values decoded into a function's own parameter types
// (FromJson) and its result encoded as plain data (ToJson).
#[allow(dead_code, unused_imports, clippy::all)]
pub mod __grpo {
    use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
    use std::fs::File;
    use std::hash::Hash;
    use std::io::{Read, Write};
    use std::os::unix::io::FromRawFd;
    use std::sync::Mutex;

    pub enum J { Null, Bool(bool), Num(String), Str(String), Arr(Vec<J>), Obj(Vec<(String, J)>) }

    struct P<'a> { s: &'a [u8], i: usize }

    impl<'a> P<'a> {
        fn ws(&mut self) { while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) { self.i += 1; } }
        fn next(&mut self) -> Result<u8, String> {
            self.ws();
            let c = *self.s.get(self.i).ok_or("unexpected end of JSON")?;
            self.i += 1;
            Ok(c)
        }
        fn lit(&mut self, word: &str) -> Result<(), String> {
            if self.s[self.i..].starts_with(word.as_bytes()) { self.i += word.len(); Ok(()) } else { Err("bad JSON".into()) }
        }
        fn hex4(&mut self) -> Result<u32, String> {
            let t = std::str::from_utf8(self.s.get(self.i..self.i + 4).ok_or("bad escape")?).map_err(|e| e.to_string())?;
            self.i += 4;
            u32::from_str_radix(t, 16).map_err(|e| e.to_string())
        }
        fn string(&mut self) -> Result<String, String> {
            self.i += 1;
            let mut out: Vec<u8> = Vec::new();
            loop {
                let c = *self.s.get(self.i).ok_or("unterminated string")?;
                self.i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        let e = *self.s.get(self.i).ok_or("bad escape")?;
                        self.i += 1;
                        let ch = match e {
                            b'n' => '\n', b't' => '\t', b'r' => '\r', b'b' => '\u{8}', b'f' => '\u{c}',
                            b'u' => {
                                let mut u = self.hex4()?;
                                if (0xD800..0xDC00).contains(&u) && self.s[self.i..].starts_with(b"\\u") {
                                    self.i += 2;
                                    let low = self.hex4()?;
                                    u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
                                }
                                char::from_u32(u).unwrap_or('\u{fffd}')
                            }
                            other => other as char,
                        };
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    _ => out.push(c),
                }
            }
            String::from_utf8(out).map_err(|e| e.to_string())
        }
        fn value(&mut self) -> Result<J, String> {
            self.ws();
            match *self.s.get(self.i).ok_or("unexpected end of JSON")? {
                b'n' => { self.lit("null")?; Ok(J::Null) }
                b't' => { self.lit("true")?; Ok(J::Bool(true)) }
                b'f' => { self.lit("false")?; Ok(J::Bool(false)) }
                b'"' => Ok(J::Str(self.string()?)),
                b'[' => {
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') { self.i += 1; return Ok(J::Arr(items)); }
                    loop {
                        items.push(self.value()?);
                        match self.next()? { b',' => continue, b']' => return Ok(J::Arr(items)), _ => return Err("bad JSON array".into()) }
                    }
                }
                b'{' => {
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') { self.i += 1; return Ok(J::Obj(items)); }
                    loop {
                        self.ws();
                        let key = self.string()?;
                        if self.next()? != b':' { return Err("bad JSON object".into()); }
                        items.push((key, self.value()?));
                        match self.next()? { b',' => continue, b'}' => return Ok(J::Obj(items)), _ => return Err("bad JSON object".into()) }
                    }
                }
                _ => {
                    let start = self.i;
                    while self.i < self.s.len() && b"+-0123456789.eEINaInfinity".contains(&self.s[self.i]) { self.i += 1; }
                    Ok(J::Num(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
                }
            }
        }
    }

    pub fn parse(text: &str) -> Result<J, String> { P { s: text.as_bytes(), i: 0 }.value() }

    /// The sandbox's tagged containers ({"$t": [...]} a tuple, {"$s"/"$f": [...]} a set,
    /// {"$d": [[k, v], ...]} a dict) as their items.
    fn items(j: &J) -> Result<Vec<&J>, String> {
        match j {
            J::Arr(v) => Ok(v.iter().collect()),
            J::Obj(o) if o.len() == 1 && ["$t", "$s", "$f", "$d"].contains(&o[0].0.as_str()) => items(&o[0].1),
            _ => Err("expected a sequence".into()),
        }
    }

    fn pairs(j: &J) -> Result<Vec<(J, &J)>, String> {
        match j {
            J::Obj(o) if !(o.len() == 1 && o[0].0 == "$d") => Ok(o.iter().map(|(k, v)| (J::Str(k.clone()), v)).collect()),
            _ => items(j)?.into_iter().map(|p| {
                let kv = items(p)?;
                if kv.len() != 2 { return Err("expected [key, value] pairs".to_string()); }
                Ok((copy(kv[0]), kv[1]))
            }).collect(),
        }
    }

    fn copy(j: &J) -> J {
        match j {
            J::Null => J::Null, J::Bool(b) => J::Bool(*b), J::Num(n) => J::Num(n.clone()), J::Str(s) => J::Str(s.clone()),
            J::Arr(v) => J::Arr(v.iter().map(copy).collect()),
            J::Obj(o) => J::Obj(o.iter().map(|(k, v)| (k.clone(), copy(v))).collect()),
        }
    }

    pub trait FromJson: Sized { fn from_json(j: &J) -> Result<Self, String>; }

    macro_rules! ints { ($($t:ty),*) => { $(impl FromJson for $t {
        fn from_json(j: &J) -> Result<Self, String> {
            match j {
                // a JSON key is text: a dict's int keys come back as strings
                J::Num(n) | J::Str(n) => n.parse::<$t>().map_err(|_| format!("{} is not a {}", n, stringify!($t))),
                _ => Err(format!("expected a {}", stringify!($t))),
            }
        }
    })* } }
    ints!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

    macro_rules! floats { ($($t:ty),*) => { $(impl FromJson for $t {
        fn from_json(j: &J) -> Result<Self, String> {
            match j {
                J::Num(n) => match n.as_str() {
                    "NaN" => Ok(<$t>::NAN), "Infinity" => Ok(<$t>::INFINITY), "-Infinity" => Ok(<$t>::NEG_INFINITY),
                    _ => n.parse::<$t>().map_err(|e| e.to_string()),
                },
                _ => Err(format!("expected a {}", stringify!($t))),
            }
        }
    })* } }
    floats!(f32, f64);

    impl FromJson for bool {
        fn from_json(j: &J) -> Result<Self, String> { if let J::Bool(b) = j { Ok(*b) } else { Err("expected a bool".into()) } }
    }
    impl FromJson for String {
        fn from_json(j: &J) -> Result<Self, String> { if let J::Str(s) = j { Ok(s.clone()) } else { Err("expected a string".into()) } }
    }
    impl FromJson for &'static str {
        fn from_json(j: &J) -> Result<Self, String> { Ok(Box::leak(String::from_json(j)?.into_boxed_str())) }
    }
    impl FromJson for char {
        fn from_json(j: &J) -> Result<Self, String> {
            let s = String::from_json(j)?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) { (Some(c), None) => Ok(c), _ => Err("expected one character".into()) }
        }
    }
    impl<T: FromJson> FromJson for Option<T> {
        fn from_json(j: &J) -> Result<Self, String> { if let J::Null = j { Ok(None) } else { Ok(Some(T::from_json(j)?)) } }
    }
    impl<T: FromJson> FromJson for Box<T> {
        fn from_json(j: &J) -> Result<Self, String> { Ok(Box::new(T::from_json(j)?)) }
    }
    impl<T: FromJson> FromJson for Vec<T> {
        fn from_json(j: &J) -> Result<Self, String> { items(j)?.into_iter().map(T::from_json).collect() }
    }
    impl<T: FromJson> FromJson for VecDeque<T> {
        fn from_json(j: &J) -> Result<Self, String> { items(j)?.into_iter().map(T::from_json).collect() }
    }
    impl<T: FromJson + Eq + Hash> FromJson for HashSet<T> {
        fn from_json(j: &J) -> Result<Self, String> { items(j)?.into_iter().map(T::from_json).collect() }
    }
    impl<T: FromJson + Ord> FromJson for BTreeSet<T> {
        fn from_json(j: &J) -> Result<Self, String> { items(j)?.into_iter().map(T::from_json).collect() }
    }
    impl<K: FromJson + Eq + Hash, V: FromJson> FromJson for HashMap<K, V> {
        fn from_json(j: &J) -> Result<Self, String> {
            pairs(j)?.into_iter().map(|(k, v)| Ok((K::from_json(&k)?, V::from_json(v)?))).collect()
        }
    }
    impl<K: FromJson + Ord, V: FromJson> FromJson for BTreeMap<K, V> {
        fn from_json(j: &J) -> Result<Self, String> {
            pairs(j)?.into_iter().map(|(k, v)| Ok((K::from_json(&k)?, V::from_json(v)?))).collect()
        }
    }
    macro_rules! tuples { ($(($($t:ident $i:tt),+))*) => { $(impl<$($t: FromJson),+> FromJson for ($($t,)+) {
        fn from_json(j: &J) -> Result<Self, String> {
            let v = items(j)?;
            if v.len() != [$($i),+].len() { return Err("a tuple of another length".into()); }
            Ok(($($t::from_json(v[$i])?,)+))
        }
    })* } }
    tuples!((A 0) (A 0, B 1) (A 0, B 1, C 2) (A 0, B 1, C 2, D 3));

    pub trait ToJson {
        fn to_json(&self, out: &mut String);
        fn is_text() -> bool where Self: Sized { false }
    }
    fn quote(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""), '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    macro_rules! show_ints { ($($t:ty),*) => { $(impl ToJson for $t { fn to_json(&self, out: &mut String) { out.push_str(&self.to_string()); } })* } }
    show_ints!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
    macro_rules! show_floats { ($($t:ty),*) => { $(impl ToJson for $t {
        fn to_json(&self, out: &mut String) {
            if self.is_nan() { out.push_str("NaN") } else if self.is_infinite() {
                out.push_str(if *self > 0.0 { "Infinity" } else { "-Infinity" })
            } else { out.push_str(&format!("{:?}", self)) }
        }
    })* } }
    show_floats!(f32, f64);
    impl ToJson for bool { fn to_json(&self, out: &mut String) { out.push_str(if *self { "true" } else { "false" }) } }
    impl ToJson for () { fn to_json(&self, out: &mut String) { out.push_str("null") } }
    impl ToJson for String { fn to_json(&self, out: &mut String) { quote(self, out) } fn is_text() -> bool { true } }
    impl ToJson for &str { fn to_json(&self, out: &mut String) { quote(self, out) } fn is_text() -> bool { true } }
    impl ToJson for char { fn to_json(&self, out: &mut String) { quote(&self.to_string(), out) } fn is_text() -> bool { true } }
    impl<T: ToJson> ToJson for Option<T> {
        fn to_json(&self, out: &mut String) { match self { Some(v) => v.to_json(out), None => out.push_str("null") } }
    }
    impl<T: ToJson> ToJson for Box<T> { fn to_json(&self, out: &mut String) { (**self).to_json(out) } }
    fn seq<'a, T: ToJson + 'a>(items: impl Iterator<Item = &'a T>, out: &mut String) {
        out.push('[');
        for (i, v) in items.enumerate() { if i > 0 { out.push_str(", "); } v.to_json(out); }
        out.push(']');
    }
    impl<T: ToJson> ToJson for Vec<T> { fn to_json(&self, out: &mut String) { seq(self.iter(), out) } }
    impl<T: ToJson> ToJson for &[T] { fn to_json(&self, out: &mut String) { seq(self.iter(), out) } }
    impl<T: ToJson, const N: usize> ToJson for [T; N] { fn to_json(&self, out: &mut String) { seq(self.iter(), out) } }
    impl<T: ToJson> ToJson for VecDeque<T> { fn to_json(&self, out: &mut String) { seq(self.iter(), out) } }
    impl<T: ToJson> ToJson for HashSet<T> {
        fn to_json(&self, out: &mut String) { out.push_str("{\"$s\": "); seq(self.iter(), out); out.push('}') }
    }
    impl<T: ToJson> ToJson for BTreeSet<T> {
        fn to_json(&self, out: &mut String) { out.push_str("{\"$s\": "); seq(self.iter(), out); out.push('}') }
    }
    fn map<'a, K: ToJson + 'a, V: ToJson + 'a>(items: impl Iterator<Item = (&'a K, &'a V)>, out: &mut String) {
        let text = K::is_text();
        out.push_str(if text { "{" } else { "{\"$d\": [" });
        for (i, (k, v)) in items.enumerate() {
            if i > 0 { out.push_str(", "); }
            if !text { out.push('['); }
            k.to_json(out);
            out.push_str(if text { ": " } else { ", " });
            v.to_json(out);
            if !text { out.push(']'); }
        }
        out.push_str(if text { "}" } else { "]}" });
    }
    impl<K: ToJson, V: ToJson> ToJson for HashMap<K, V> { fn to_json(&self, out: &mut String) { map(self.iter(), out) } }
    impl<K: ToJson, V: ToJson> ToJson for BTreeMap<K, V> { fn to_json(&self, out: &mut String) { map(self.iter(), out) } }
    macro_rules! show_tuples { ($(($($t:ident $i:tt),+))*) => { $(impl<$($t: ToJson),+> ToJson for ($($t,)+) {
        fn to_json(&self, out: &mut String) {
            out.push('[');
            $( if $i > 0 { out.push_str(", "); } self.$i.to_json(out); )+
            out.push(']');
        }
    })* } }
    show_tuples!((A 0) (A 0, B 1) (A 0, B 1, C 2) (A 0, B 1, C 2, D 3));

    /// A function pointer called with JSON arguments decoded into its own parameter types.
    pub trait Call<Args> { fn call_json(self, args: &[J]) -> Result<String, String>; }
    macro_rules! calls { ($(($($a:ident $i:tt),*))*) => { $(impl<R: ToJson, $($a: FromJson),*> Call<($($a,)*)> for fn($($a),*) -> R {
        #[allow(unused_variables)]
        fn call_json(self, args: &[J]) -> Result<String, String> {
            let arity: &[usize] = &[$($i),*];
            if args.len() != arity.len() { return Err(format!("the function takes {} arguments, the test gives {}", arity.len(), args.len())); }
            let result = (self)($($a::from_json(&args[$i]).map_err(|e| format!("argument {}: {}", $i + 1, e))?),*);
            let mut out = String::new();
            result.to_json(&mut out);
            Ok(out)
        }
    })* } }
    calls!(() (A 0) (A 0, B 1) (A 0, B 1, C 2) (A 0, B 1, C 2, D 3) (A 0, B 1, C 2, D 3, E 4) (A 0, B 1, C 2, D 3, E 4, F 5));

    static PANIC: Mutex<String> = Mutex::new(String::new());

    pub struct Payload { pub nonce: String, pub what: Vec<(String, J)> }

    impl Payload {
        pub fn read() -> Payload {
            let mut text = String::new();
            let mut file = unsafe { File::from_raw_fd(4) };
            let _ = file.read_to_string(&mut text);
            drop(file);
            let (nonce, rest) = text.split_once('\n').unwrap_or((&text, "{}"));
            let what = match parse(rest) { Ok(J::Obj(o)) => o, _ => Vec::new() };
            std::panic::set_hook(Box::new(|info| {
                let text = info.to_string();
                eprintln!("{}", text);
                if let Ok(mut p) = PANIC.lock() { *p = text; }
            }));
            Payload { nonce: nonce.to_string(), what }
        }
        pub fn get(&self, key: &str) -> Option<&J> { self.what.iter().find(|(k, _)| k == key).map(|(_, v)| v) }
        pub fn report(&self, event: &str, extra: &str) {
            let mut line = String::from("{\"nonce\":");
            quote(&self.nonce, &mut line);
            line.push_str(", \"event\": ");
            quote(event, &mut line);
            line.push_str(extra);
            line.push_str("}\n");
            let mut file = unsafe { File::from_raw_fd(3) };
            let _ = file.write_all(line.as_bytes());
            std::mem::forget(file);
        }
        pub fn message(text: &str) -> String { let mut out = String::from(", \"message\": "); quote(text, &mut out); out }
        pub fn panicked() -> String { PANIC.lock().map(|p| p.clone()).unwrap_or_default() }
        pub fn index(&self) -> usize { match self.get("test") { Some(J::Num(n)) => n.parse().unwrap_or(usize::MAX), _ => usize::MAX } }
        pub fn call(&self) -> (String, Vec<J>) {
            let name = match self.get("fn") { Some(J::Str(s)) => s.clone(), _ => String::new() };
            let args = match self.get("args") { Some(J::Arr(v)) => v.iter().map(copy).collect(), _ => Vec::new() };
            (name, args)
        }
    }
}

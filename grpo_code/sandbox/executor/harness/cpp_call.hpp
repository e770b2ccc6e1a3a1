// The grpo-code C++ call harness: the main() of the binary that runs a job's call tests.
//
// The cpp runner (grpo_code/sandbox/executor/runners.py, call_unit) compiles one
// translation unit per job: the program (its own main renamed), #undef lines for every
// identifier used here, the head of cpp.hpp (the report line, __assert_fail, exception
// names), then this file with the table __grpo_calls put in at the @@calls@@ line: one
// entry per function the job's call tests name, each `__grpo_call::run(&::NAME, args)`.
// The executor runs the binary once per test as `prog <function index>`, with a payload on
// fd 4 (the per-test nonce, a newline, the test's arguments as JSON in the project's value
// encoding: docs/sandbox.md, Values) and a private report pipe on fd 3.
//
// run() deduces the function's parameter and return types from its pointer (decayed:
// `const vector<int>&` takes a vector<int>), decodes each argument into its type, calls
// the function and reports `returned` with the value encoded the same way. The process
// never holds an expected value: the executor compares what it returned, outside it, so a
// forged report is no more than returning that value. Types: bool, char, integers,
// floating point (a float is written in its shortest round-trip form, so 3.1f reads 3.1),
// std::string, vector, list, deque, set, unordered_set, map, unordered_map (string or char
// keys as a JSON object, others as {"$d": [[key, value], ...]}), pair and tuple (arrays),
// optional (null or the value); a function returning void reports null. Any other type is
// a compile error naming it.
#include <charconv>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace __grpo_call {

struct node {
  enum kind_t { null_v, bool_v, number_v, string_v, array_v, object_v } kind = null_v;
  bool flag = false;
  std::string text;  // a number as written, or a string's value
  std::vector<node> items;  // array items, object values
  std::vector<std::string> keys;  // object keys
};

struct bad_value {
  const char *why;
};

// ------------------------------------------------------------------ reading JSON

struct reader {
  const char *p;
  const char *end;
  int depth = 0;

  void space() {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  }
  bool word(const char *w) {
    const char *q = p;
    for (; *w != '\0'; ++w, ++q)
      if (q >= end || *q != *w) return false;
    p = q;
    return true;
  }
  static void utf8(std::string &out, unsigned long c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  unsigned long hex4() {
    if (end - p < 4) throw bad_value{"short \\u escape"};
    unsigned long c = 0;
    for (int i = 0; i < 4; ++i, ++p) {
      char h = *p;
      c = c * 16 + static_cast<unsigned long>(h >= 'a' ? h - 'a' + 10 : h >= 'A' ? h - 'A' + 10 : h - '0');
    }
    return c;
  }
  std::string string() {
    std::string out;
    ++p;  // the opening quote
    while (p < end && *p != '"') {
      if (*p != '\\') {
        out += *p++;
        continue;
      }
      ++p;
      if (p >= end) break;
      char e = *p++;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned long c = hex4();
          if (c >= 0xd800 && c < 0xdc00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            p += 2;
            unsigned long low = hex4();
            c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
          }
          utf8(out, c);
          break;
        }
        default: out += e;
      }
    }
    if (p >= end) throw bad_value{"unterminated string"};
    ++p;
    return out;
  }
  node value() {
    if (++depth > 200) throw bad_value{"value nested too deeply"};
    space();
    node n;
    if (p >= end) throw bad_value{"truncated value"};
    if (*p == '"') {
      n.kind = node::string_v;
      n.text = string();
    } else if (*p == '[' || *p == '{') {
      bool object = *p++ == '{';
      n.kind = object ? node::object_v : node::array_v;
      space();
      if (p < end && *p == (object ? '}' : ']')) {
        ++p;
      } else {
        for (;;) {
          if (object) {
            space();
            if (p >= end || *p != '"') throw bad_value{"an object key is not a string"};
            n.keys.push_back(string());
            space();
            if (p >= end || *p++ != ':') throw bad_value{"missing ':'"};
          }
          n.items.push_back(value());
          space();
          if (p < end && *p == ',') {
            ++p;
            continue;
          }
          if (p < end && *p == (object ? '}' : ']')) {
            ++p;
            break;
          }
          throw bad_value{"malformed array or object"};
        }
      }
    } else if (word("true")) {
      n.kind = node::bool_v;
      n.flag = true;
    } else if (word("false")) {
      n.kind = node::bool_v;
    } else if (word("null")) {
      n.kind = node::null_v;
    } else {
      const char *start = p;
      while (p < end && (*p == '-' || *p == '+' || *p == '.' || (*p >= '0' && *p <= '9') || *p == 'e' ||
                         *p == 'E' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
        ++p;
      if (p == start) throw bad_value{"unexpected character"};
      n.kind = node::number_v;
      n.text.assign(start, p);
    }
    --depth;
    return n;
  }
};

// A tagged value ({"$t": [...]}, {"$d": [...]}): its body, or null.
inline const node *tagged(const node &n, const char *tag) {
  if (n.kind == node::object_v && n.keys.size() == 1 && n.keys[0] == tag) return &n.items[0];
  return nullptr;
}

// The items of a sequence: an array, or a tuple / set / frozenset tag.
inline const std::vector<node> &sequence(const node &n) {
  if (n.kind == node::array_v) return n.items;
  for (const char *tag : {"$t", "$s", "$f"}) {
    const node *body = tagged(n, tag);
    if (body != nullptr && body->kind == node::array_v) return body->items;
  }
  throw bad_value{"expected a list"};
}

// ------------------------------------------------------------------ writing JSON

inline unsigned long utf8_length(const char *s, unsigned long i, unsigned long n) {
  // the length of the UTF-8 sequence at s[i], 0 where none starts there
  unsigned char c = static_cast<unsigned char>(s[i]);
  unsigned long len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > n) return 0;
  for (unsigned long k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return 0;
  return len;
}

inline bool is_text(const char *s, unsigned long n) {
  for (unsigned long i = 0; i < n;) {
    unsigned long len = utf8_length(s, i, n);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

// A message: JSON text, a byte that is not UTF-8 shown as the code point of its value.
inline void put_text(std::string &out, const char *s, unsigned long n) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (unsigned long i = 0; i < n;) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    unsigned long len = utf8_length(s, i, n);
    if (len == 0) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else {
      out.append(s + i, len);
      i += len;
    }
  }
  out += '"';
}

// A returned string: text when it is UTF-8, else its bytes as they are ({"$b": hex}), which
// equal only the same bytes (read as code points, 0xE9 would pass for the text "\u00e9").
inline void put_string(std::string &out, const char *s, unsigned long n) {
  static const char hex[] = "0123456789abcdef";
  if (is_text(s, n)) {
    put_text(out, s, n);
    return;
  }
  out += "{\"$b\":\"";
  for (unsigned long k = 0; k < n; ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  out += "\"}";
}

template <class F> void put_float(std::string &out, F v) {
  if (v != v) {
    out += "NaN";
    return;
  }
  if (v > 0 && v - v != v - v) {
    out += "Infinity";
    return;
  }
  if (v < 0 && v - v != v - v) {
    out += "-Infinity";
    return;
  }
  char buf[64];
  auto done = std::to_chars(buf, buf + sizeof buf, v);  // the shortest form that reads back as v
  std::string text(buf, done.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a float stays a float
  out += text;
}

// ------------------------------------------------------------------ the codec per type

template <class T, class Enable = void> struct codec {
  static_assert(sizeof(T) == 0, "grpo-code: a call test cannot pass or return a value of this type");
};

template <> struct codec<bool> {
  static bool decode(const node &n) {
    if (n.kind == node::bool_v) return n.flag;
    if (n.kind == node::number_v) return n.text != "0";
    throw bad_value{"expected a boolean"};
  }
  static void encode(bool v, std::string &out) { out += v ? "true" : "false"; }
};

template <> struct codec<char> {
  static char decode(const node &n) {
    if (n.kind == node::string_v && n.text.size() == 1) return n.text[0];
    if (n.kind == node::number_v) return static_cast<char>(std::stol(n.text));
    throw bad_value{"expected a one-character string"};
  }
  static void encode(char v, std::string &out) { put_string(out, &v, 1); }
};

template <class T>
struct codec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>>> {
  static T decode(const node &n) {
    if (n.kind == node::bool_v) return static_cast<T>(n.flag);
    if (n.kind != node::number_v) throw bad_value{"expected an integer"};
    const char *first = n.text.data();
    const char *last = first + n.text.size();
    T v{};
    auto got = std::from_chars(first, last, v);
    if (got.ec == std::errc() && got.ptr == last) return v;
    double d = 0;  // an integral float (2.0)
    auto fd = std::from_chars(first, last, d);
    if (fd.ec == std::errc() && fd.ptr == last && d == static_cast<double>(static_cast<T>(d))) return static_cast<T>(d);
    throw bad_value{"expected an integer in the parameter's range"};
  }
  static void encode(T v, std::string &out) {
    char buf[32];
    auto done = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, done.ptr);
  }
};

template <class T> struct codec<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static T decode(const node &n) {
    if (n.kind != node::number_v) throw bad_value{"expected a number"};
    if (n.text == "NaN") return static_cast<T>(__builtin_nan(""));
    if (n.text == "Infinity") return static_cast<T>(__builtin_inf());
    if (n.text == "-Infinity") return -static_cast<T>(__builtin_inf());
    double d = 0;
    auto got = std::from_chars(n.text.data(), n.text.data() + n.text.size(), d);
    if (got.ec != std::errc()) throw bad_value{"expected a number"};
    return static_cast<T>(d);
  }
  static void encode(T v, std::string &out) {
    if constexpr (std::is_same_v<T, float>) put_float(out, v);
    else put_float(out, static_cast<double>(v));
  }
};

template <> struct codec<std::string> {
  static std::string decode(const node &n) {
    if (n.kind == node::string_v) return n.text;
    // Bytes ({"$b": hex}), as a string that is not UTF-8 is written (a judge reads them back).
    const node *hex = tagged(n, "$b");
    if (hex == nullptr || hex->kind != node::string_v || hex->text.size() % 2 != 0) throw bad_value{"expected a string"};
    std::string out;
    for (std::size_t i = 0; i < hex->text.size(); i += 2) {
      int byte = 0;
      for (std::size_t j = i; j < i + 2; ++j) {
        char c = hex->text[j];
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0) throw bad_value{"expected a string"};
        byte = byte * 16 + digit;
      }
      out += static_cast<char>(byte);
    }
    return out;
  }
  static void encode(const std::string &v, std::string &out) { put_string(out, v.data(), v.size()); }
};

template <class C> struct sequence_codec {
  using item = typename C::value_type;
  static C decode(const node &n) {
    C out;
    for (const node &x : sequence(n)) out.insert(out.end(), codec<item>::decode(x));
    return out;
  }
  static void encode(const C &v, std::string &out) {
    out += '[';
    bool first = true;
    for (const auto &x : v) {
      if (!first) out += ',';
      first = false;
      codec<item>::encode(x, out);
    }
    out += ']';
  }
};

template <class T, class A> struct codec<std::vector<T, A>> : sequence_codec<std::vector<T, A>> {};
template <class T, class A> struct codec<std::list<T, A>> : sequence_codec<std::list<T, A>> {};
template <class T, class A> struct codec<std::deque<T, A>> : sequence_codec<std::deque<T, A>> {};
template <class T, class C, class A> struct codec<std::set<T, C, A>> : sequence_codec<std::set<T, C, A>> {};
template <class T, class H, class E, class A>
struct codec<std::unordered_set<T, H, E, A>> : sequence_codec<std::unordered_set<T, H, E, A>> {};

template <class M> struct map_codec {
  using key = std::remove_const_t<typename M::key_type>;
  using mapped = typename M::mapped_type;
  static constexpr bool text_keys = std::is_same_v<key, std::string> || std::is_same_v<key, char>;
  static M decode(const node &n) {
    M out;
    if (n.kind == node::object_v && tagged(n, "$d") == nullptr) {
      for (std::size_t i = 0; i < n.keys.size(); ++i) {
        node k;
        k.kind = node::string_v;
        k.text = n.keys[i];
        if constexpr (!text_keys) k.kind = node::number_v;
        out.emplace(codec<key>::decode(k), codec<mapped>::decode(n.items[i]));
      }
      return out;
    }
    const node *body = tagged(n, "$d");
    for (const node &pair : body != nullptr ? sequence(*body) : sequence(n)) {
      const std::vector<node> &kv = sequence(pair);
      if (kv.size() != 2) throw bad_value{"expected [key, value] pairs"};
      out.emplace(codec<key>::decode(kv[0]), codec<mapped>::decode(kv[1]));
    }
    return out;
  }
  static bool key_is_text(const key &k) {
    if constexpr (std::is_same_v<key, std::string>) return is_text(k.data(), k.size());
    else if constexpr (std::is_same_v<key, char>) return static_cast<unsigned char>(k) < 0x80;
    else return false;
  }
  static void encode(const M &v, std::string &out) {
    // an object where every key is text; pairs ({"$d": ...}) otherwise (a key that is not
    // UTF-8 is bytes, which no JSON key can be)
    bool object = text_keys;
    for (const auto &kv : v) object = object && key_is_text(kv.first);
    out += object ? "{" : "{\"$d\":[";
    bool first = true;
    for (const auto &kv : v) {
      if (!first) out += ',';
      first = false;
      if (object) {
        codec<key>::encode(kv.first, out);
        out += ':';
      } else {
        out += '[';
        codec<key>::encode(kv.first, out);
        out += ',';
      }
      codec<mapped>::encode(kv.second, out);
      if (!object) out += ']';
    }
    out += object ? "}" : "]}";
  }
};

template <class K, class V, class C, class A> struct codec<std::map<K, V, C, A>> : map_codec<std::map<K, V, C, A>> {};
template <class K, class V, class H, class E, class A>
struct codec<std::unordered_map<K, V, H, E, A>> : map_codec<std::unordered_map<K, V, H, E, A>> {};

template <class... T> struct codec<std::tuple<T...>> {
  template <std::size_t... I> static std::tuple<T...> from(const std::vector<node> &items, std::index_sequence<I...>) {
    return std::tuple<T...>(codec<T>::decode(items[I])...);
  }
  static std::tuple<T...> decode(const node &n) {
    const std::vector<node> &items = sequence(n);
    if (items.size() != sizeof...(T)) throw bad_value{"a tuple of another length"};
    return from(items, std::index_sequence_for<T...>{});
  }
  static void encode(const std::tuple<T...> &v, std::string &out) {
    out += '[';
    std::size_t i = 0;
    std::apply([&](const auto &...x) { ((out += (i++ ? "," : ""), codec<std::decay_t<decltype(x)>>::encode(x, out)), ...); }, v);
    out += ']';
  }
};

template <class A, class B> struct codec<std::pair<A, B>> {
  static std::pair<A, B> decode(const node &n) {
    const std::vector<node> &items = sequence(n);
    if (items.size() != 2) throw bad_value{"a pair of another length"};
    return std::pair<A, B>(codec<A>::decode(items[0]), codec<B>::decode(items[1]));
  }
  static void encode(const std::pair<A, B> &v, std::string &out) {
    out += '[';
    codec<A>::encode(v.first, out);
    out += ',';
    codec<B>::encode(v.second, out);
    out += ']';
  }
};

template <class T> struct codec<std::optional<T>> {
  static std::optional<T> decode(const node &n) {
    if (n.kind == node::null_v) return std::nullopt;
    return codec<T>::decode(n);
  }
  static void encode(const std::optional<T> &v, std::string &out) {
    if (v) codec<T>::encode(*v, out);
    else out += "null";
  }
};

// ------------------------------------------------------------------ one call

inline std::string nonce;

inline void send(const char *event, const std::string &fields) {
  std::string line = "{\"nonce\":\"" + nonce + "\",\"event\":\"" + event + "\"" + fields + "}\n";
  const char *p = line.data();
  unsigned long left = line.size();
  while (left > 0) {
    long n = ::write(3, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<unsigned long>(n);
  }
}

inline void fail(const std::string &message) {
  std::string fields = ",\"message\":";
  put_text(fields, message.data(), message.size());
  send("runtime_error", fields);
  ::_exit(1);
}

template <class... A, std::size_t... I>
std::tuple<std::decay_t<A>...> arguments(const std::vector<node> &items, std::index_sequence<I...>) {
  std::size_t at = 0;
  try {
    return std::tuple<std::decay_t<A>...>((at = I, codec<std::decay_t<A>>::decode(items[I]))...);
  } catch (const bad_value &bad) {
    fail("argument " + std::to_string(at + 1) + " does not fit the function's parameter: " + bad.why);
  } catch (const std::logic_error &) {
    fail("argument " + std::to_string(at + 1) + " does not fit the function's parameter");
  }
  throw bad_value{"unreachable"};
}

template <class R, class... A> void run(R (*f)(A...), const node &args) {
  if (args.kind != node::array_v || args.items.size() != sizeof...(A))
    fail("the test passes " + std::to_string(args.items.size()) + " arguments; the function takes " +
         std::to_string(sizeof...(A)));
  auto values = arguments<A...>(args.items, std::index_sequence_for<A...>{});
  std::string fields = ",\"value\":";
  if constexpr (std::is_void_v<R>) {
    std::apply(f, values);
    fields += "null";
  } else {
    decltype(auto) result = std::apply(f, values);
    codec<std::decay_t<R>>::encode(result, fields);
  }
  __grpo_flush();
  send("returned", fields);
  ::_exit(0);
}

}  // namespace __grpo_call

// @@calls@@

int main(int argc, char **argv) {
  // The payload: the nonce, a newline, the arguments. Read whole, then fd 4 is closed.
  std::string payload;
  char chunk[65536];
  for (;;) {
    long n = ::read(4, chunk, sizeof chunk);
    if (n <= 0) break;
    payload.append(chunk, static_cast<unsigned long>(n));
  }
  ::close(4);
  std::size_t cut = payload.find('\n');
  if (cut == std::string::npos || cut > 64) cut = 0;
  __grpo_call::nonce = payload.substr(0, cut);
  for (std::size_t i = 0; i < cut; ++i) __grpo_nonce[i] = payload[i];  // for __assert_fail's report
  __grpo_nonce[cut] = '\0';
  long index = -1;
  if (argc > 1) {
    index = 0;
    for (const char *p = argv[1]; *p >= '0' && *p <= '9'; ++p) index = index * 10 + (*p - '0');
  }
  if (index < 0 || index >= __grpo_call_count) __grpo_call::fail("harness: function index out of range");
  __grpo_guarded([&] {
    __grpo_call::reader in{payload.data() + cut + 1, payload.data() + payload.size()};
    __grpo_call::node args;
    try {
      args = in.value();
    } catch (const __grpo_call::bad_value &bad) {
      __grpo_call::fail(std::string("harness: unreadable arguments: ") + bad.why);
    }
    __grpo_calls[index](args);
  });
  __grpo_call::fail("harness: the call returned no value");
}

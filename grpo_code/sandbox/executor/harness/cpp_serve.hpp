// The program's side of a judged C++ script test: the main() of a binary that answers calls.
//
// The cpp runner (runners.py, serve_unit) compiles the program (its own main renamed) with
// the head of cpp.hpp, the codec of cpp_call.hpp and this file, with the table
// __grpo_serve put in at the @@serve@@ line: one entry per program function the test
// calls, each `__grpo_call::answer(&::NAME, args)`, so the parameter types are the
// program's own and the arguments are decoded into them. The test itself runs in the
// judge (cpp_judge.hpp), a binary built from the test and the task's declarations
// without the program; this process holds no test, no expected value and no nonce.
//
// On fd 3 (a socket to the judge) it reads one request a line, `<index> <arguments as a
// JSON array>`, calls the function and writes one line back: {"value": ...} in the
// project's value encoding, or {"error": {"name": ..., "message": ...}} for an exception.
// It ends when the judge closes the socket.

namespace __grpo_call {

template <class... A, std::size_t... I>
std::tuple<std::decay_t<A>...> decoded(const std::vector<node> &items, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<A>...>(codec<std::decay_t<A>>::decode(items[I])...);
}

template <class R, class... A> std::string answer(R (*f)(A...), const node &args) {
  if (args.kind != node::array_v || args.items.size() != sizeof...(A)) throw bad_value{"the number of arguments"};
  auto values = decoded<A...>(args.items, std::index_sequence_for<A...>{});
  std::string out;
  if constexpr (std::is_void_v<R>) {
    std::apply(f, values);
    out = "null";
  } else {
    decltype(auto) result = std::apply(f, values);
    codec<std::decay_t<R>>::encode(result, out);
  }
  return out;
}

inline void put_line(const std::string &line) {
  const char *p = line.data();
  unsigned long left = line.size();
  while (left > 0) {
    long n = ::write(3, p, left);
    if (n <= 0) ::_exit(0);  // the judge is gone
    p += n;
    left -= static_cast<unsigned long>(n);
  }
}

inline std::string error_line(const char *name, const char *message) {
  std::string out = "{\"error\":{\"name\":";
  put_text(out, name, __builtin_strlen(name));
  out += ",\"message\":";
  put_text(out, message, __builtin_strlen(message));
  return out + "}}\n";
}

}  // namespace __grpo_call

// @@serve@@

int main() {
  std::string pending;
  char chunk[65536];
  for (;;) {
    std::size_t cut;
    while ((cut = pending.find('\n')) == std::string::npos) {
      long n = ::read(3, chunk, sizeof chunk);
      if (n <= 0) ::_exit(0);  // the judge is done
      pending.append(chunk, static_cast<unsigned long>(n));
    }
    std::string request = pending.substr(0, cut);
    pending.erase(0, cut + 1);
    long index = 0;
    std::size_t at = 0;
    while (at < request.size() && request[at] >= '0' && request[at] <= '9') index = index * 10 + (request[at++] - '0');
    std::string reply;
    try {
      if (index >= __grpo_serve_count) throw __grpo_call::bad_value{"no such function"};
      __grpo_call::reader in{request.data() + at, request.data() + request.size()};
      __grpo_call::node args = in.value();
      reply = "{\"value\":" + __grpo_serve[index](args) + "}\n";
    } catch (const __grpo_call::bad_value &bad) {
      reply = __grpo_call::error_line("invalid_argument", bad.why);
    } catch (const std::bad_alloc &) {
      reply = __grpo_call::error_line("std::bad_alloc", "out of memory");
    } catch (const std::exception &e) {
      int status = 0;
      char *readable = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
      reply = __grpo_call::error_line(status == 0 && readable != nullptr ? readable : typeid(e).name(), e.what());
      ::free(readable);
    } catch (...) {
      reply = __grpo_call::error_line("unknown", "an exception of a type not derived from std::exception");
    }
    __grpo_flush();
    __grpo_call::put_line(reply);
  }
}

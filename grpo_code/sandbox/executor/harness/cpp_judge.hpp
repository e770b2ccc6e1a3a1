// The judge of a C++ script test: the test's calls of program functions, made in another process.
//
// The cpp runner (runners.py, judge_unit) compiles the task's declarations (its `helpers`:
// the prompt's headers, helper functions and the prototype of each program function),
// the head of cpp.hpp, the codec of cpp_call.hpp, this file, then one stand-in definition
// per program function the test calls, with the prototype's signature:
//
//   vector<int> sort_third(vector<int> __grpo_a0) {
//     return __grpo_judge::proxy<decltype(&::sort_third)>::call(0, __grpo_a0);
//   }
//
// then the script tests and cpp.hpp's main. The program is not in this binary. A call
// encodes its arguments in the project's value encoding, writes `<index> <arguments>` on
// fd 7 (a socket to the program's process, cpp_serve.hpp), blocks for the answer and
// decodes it into the return type the task declared (never one the program's text says).
// The executor runs this binary from a sealed copy its user cannot read, so the kernel
// makes it non-dumpable: the program's process (same uid) cannot read its memory (the
// test's expected values) or write its report pipe (fd 3).
//
// What the program does wrong ends the test at once, with a report the program cannot
// turn into a pass (the test cannot catch it): program_gone (it ended or closed the
// socket), protocol (an answer that does not decode into the declared type), raised (it
// threw an exception).

namespace __grpo_judge {

inline std::string pending;

[[noreturn]] inline void end(const char *event, const char *message) {
  __grpo_flush();
  __grpo_report(event, message);
  ::_exit(1);
}

inline void put_all(const std::string &line) {
  const char *p = line.data();
  unsigned long left = line.size();
  while (left > 0) {
    long n = ::write(7, p, left);
    if (n <= 0) end("program_gone", "the program's process ended during the test");
    p += n;
    left -= static_cast<unsigned long>(n);
  }
}

inline std::string next_line() {
  static char chunk[65536];
  std::size_t cut;
  while ((cut = pending.find('\n')) == std::string::npos) {
    if (pending.size() > (64ul << 20)) end("protocol", "an answer over the size limit");
    long n = ::read(7, chunk, sizeof chunk);
    if (n <= 0) end("program_gone", "the program's process ended during the test");
    pending.append(chunk, static_cast<unsigned long>(n));
  }
  std::string line = pending.substr(0, cut);
  pending.erase(0, cut + 1);
  return line;
}

inline const __grpo_call::node *field(const __grpo_call::node &n, const char *key) {
  if (n.kind != __grpo_call::node::object_v || n.keys.size() != 1 || n.keys[0] != key) return nullptr;
  return &n.items[0];
}

template <class F> struct proxy;

template <class R, class... A> struct proxy<R (*)(A...)> {
  static_assert(!std::is_reference_v<R>, "grpo-code: a judged test cannot call a function that returns a reference");

  static R call(long index, const std::decay_t<A> &...args) {
    std::string out = std::to_string(index) + " [";
    bool first = true;
    ((out += first ? "" : ",", first = false, __grpo_call::codec<std::decay_t<A>>::encode(args, out)), ...);
    put_all(out + "]\n");
    std::string line = next_line();
    __grpo_call::node reply;
    try {
      __grpo_call::reader in{line.data(), line.data() + line.size()};
      reply = in.value();
    } catch (const __grpo_call::bad_value &bad) {
      end("protocol", bad.why);
    }
    if (const __grpo_call::node *error = field(reply, "error")) {
      std::string message = "the program raised an exception";
      if (error->kind == __grpo_call::node::object_v) {
        for (std::size_t i = 0; i < error->keys.size(); ++i)
          if (error->items[i].kind == __grpo_call::node::string_v)
            message += (error->keys[i] == "name" ? " " : ": ") + error->items[i].text;
      }
      end("raised", message.c_str());
    }
    const __grpo_call::node *value = field(reply, "value");
    if (value == nullptr) end("protocol", "an answer of no known kind");
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      try {
        return __grpo_call::codec<std::decay_t<R>>::decode(*value);
      } catch (const __grpo_call::bad_value &bad) {
        std::string message = std::string("the program's answer does not fit the declared return type: ") + bad.why;
        end("protocol", message.c_str());
      } catch (const std::logic_error &) {
        end("protocol", "the program's answer does not fit the declared return type");
      }
    }
  }
};

}  // namespace __grpo_judge

// The grpo-code C++ test harness: the main() of the binary that runs a job's script tests.
//
// The cpp runner (grpo_code/sandbox/runners.py) compiles one translation unit per job:
// the program (its own main renamed), then every script test with its main renamed to
// __grpo_test_main_<i>, then #undef lines for every identifier used in this file (so
// macros of the program cannot rewrite the harness), then this file with the table
// __grpo_tests of the tests put in at the @@tests@@ line. The executor runs the binary
// once per test as `prog <i>`, with the per-test nonce on fd 4 and a private report pipe
// on fd 3.
//
// It reports, with the nonce, what it saw: completed (the test's main returned), assertion
// (a failed assert(): __assert_fail is defined here, so a program cannot define it away),
// memory (std::bad_alloc), runtime_error (any other exception). exit(0), quick_exit or
// _exit before the test returns leave no report, so the test fails. The value a test's
// main returns is not used: a renamed main that runs off its end has no defined value.
//
// It includes only headers that declare names in namespaces (std, abi) and declares the
// four system calls it needs itself: the C headers would add global names (index, y1,
// random, ...) that can clash with a program's own globals.
#include <cxxabi.h>
#include <exception>
#include <new>
#include <typeinfo>

extern "C" {
long read(int fd, void *buf, unsigned long count);
long write(int fd, const void *buf, unsigned long count);
int close(int fd);
void _exit(int status) __attribute__((__noreturn__));
void free(void *ptr) noexcept;
}

static char __grpo_nonce[65];

// The report line is built in a fixed buffer: no allocation, nothing of the program's.
struct __grpo_line {
  char data[4096];
  unsigned long size = 0;
  void put(char c) {
    if (size < sizeof data) data[size++] = c;
  }
  void raw(const char *text) {
    while (*text != '\0') put(*text++);
  }
  void escaped(const char *text, unsigned long limit) {
    static const char hex[] = "0123456789abcdef";
    for (; *text != '\0' && limit > 0; ++text, --limit) {
      unsigned char c = static_cast<unsigned char>(*text);
      if (c == '"' || c == '\\') {
        put('\\');
        put(static_cast<char>(c));
      } else if (c < 0x20 || c >= 0x7f) {
        raw("\\u00");
        put(hex[c >> 4]);
        put(hex[c & 15]);
      } else {
        put(static_cast<char>(c));
      }
    }
  }
};

static void __grpo_report(const char *event, const char *message, const char *detail = nullptr) {
  __grpo_line line;
  line.raw("{\"nonce\":\"");
  line.raw(__grpo_nonce);
  line.raw("\",\"event\":\"");
  line.raw(event);
  line.raw("\"");
  if (message != nullptr) {
    line.raw(",\"message\":\"");
    line.escaped(message, 1000);
    if (detail != nullptr) line.escaped(detail, 1000);
    line.raw("\"");
  }
  line.raw("}\n");
  const char *p = line.data;
  unsigned long left = line.size;
  while (left > 0) {
    long n = ::write(3, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<unsigned long>(n);
  }
}

// Output the test printed reaches its pipe before the report (only the streams the
// program actually included can hold any).
static void __grpo_flush() {
#ifdef _GLIBCXX_IOSTREAM
  std::cout.flush();
  std::cerr.flush();
#endif
#ifdef _STDIO_H
  ::fflush(nullptr);
#endif
}

extern "C" void __assert_fail(const char *assertion, const char *file, unsigned int line,
                              const char *function) noexcept {
  char number[16];
  int at = sizeof number - 1;
  number[at] = '\0';
  do {
    number[--at] = static_cast<char>('0' + line % 10);
    line /= 10;
  } while (line > 0 && at > 0);
  __grpo_flush();
  __grpo_line message;
  message.raw(file);
  message.put(':');
  message.raw(number + at);
  message.raw(": ");
  message.raw(function);
  message.raw(": Assertion `");
  message.raw(assertion);
  message.raw("' failed.");
  message.put('\0');
  message.data[sizeof message.data - 1] = '\0';
  __grpo_report("assertion", message.data);
  ::_exit(1);
}

static int __grpo_invoke(int (*test)()) { return test(); }

static int __grpo_invoke(int (*test)(int, char **)) {
  static char name[] = "main";
  char *argv[] = {name, nullptr};
  return test(1, argv);
}

static void __grpo_report_exception(const char *prefix, const std::type_info &type, const char *what) {
  int status = 0;
  char *readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  __grpo_line message;
  message.raw(prefix);
  message.raw(status == 0 && readable != nullptr ? readable : type.name());
  if (what != nullptr) {
    message.raw(": ");
    message.raw(what);
  }
  message.put('\0');
  message.data[sizeof message.data - 1] = '\0';
  ::free(readable);
  __grpo_report("runtime_error", message.data);
}

// Runs the program's code (a test's main, a call): an exception that escapes it ends the
// process with its verdict (memory, runtime_error). The call harness uses it too.
template <class F> static void __grpo_guarded(F run) {
  try {
    run();
  } catch (const std::bad_alloc &) {
    __grpo_flush();
    __grpo_report("memory", nullptr);
    ::_exit(1);
  } catch (const std::exception &e) {
    __grpo_flush();
    __grpo_report_exception("uncaught exception ", typeid(e), e.what());
    ::_exit(1);
  } catch (...) {
    __grpo_flush();
    __grpo_report("runtime_error", "uncaught exception of a type not derived from std::exception");
    ::_exit(1);
  }
}

// @@tests@@

int main(int argc, char **argv) {
  // The nonce is read before the test runs; fd 4 is closed afterwards.
  long got = 0;
  while (got < 64) {
    long n = ::read(4, __grpo_nonce + got, static_cast<unsigned long>(64 - got));
    if (n <= 0) break;
    got += n;
  }
  __grpo_nonce[got] = '\0';
  ::close(4);
  long index = -1;
  if (argc > 1) {
    index = 0;
    for (const char *p = argv[1]; *p >= '0' && *p <= '9'; ++p) index = index * 10 + (*p - '0');
  }
  if (index < 0 || index >= __grpo_test_count) {
    __grpo_report("runtime_error", "harness: test index out of range");
    ::_exit(1);
  }
  __grpo_guarded([&] { __grpo_tests[index](); });
  __grpo_flush();
  __grpo_report("completed", nullptr);
  ::_exit(0);
}

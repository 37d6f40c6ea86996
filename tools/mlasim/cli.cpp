// File: tools/mlasim/cli.cpp — the `mlasim` app: global flags, subcommand table, error policy.
#include "tools/mlasim/cli.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ref/int_text.h"
#include "ref/limits.h"

#include "tools/mlasim/commands.h"

#ifndef MLASIM_VERSION
#define MLASIM_VERSION "0.1.0"
#endif

namespace mlasim::cli {
namespace {

using RegisterFn = std::unique_ptr<Command> (*)(CLI::App&);

// Every subcommand, in the order `mlasim --help` lists them.
constexpr RegisterFn kCommands[] = {
    &RegisterReplay,  &RegisterExplainFault,  &RegisterFuzz,
    &RegisterMutants, &RegisterPlan,          &RegisterNumerics,
    &RegisterCheck,   &RegisterEffectiveness, &RegisterTriage,
};

std::string VersionString() {
  return std::string("mlasim ") + MLASIM_VERSION +
         " (reference planner: aiter 2026-03 b3037388f4, 2026-08 e4048607)";
}

// "plan" when the parse got as far as the plan subcommand, "" at the top level.
std::string SelectedCommand(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? std::string() : subs.front()->get_name();
}

// CLI11's parse messages in the `FIELD: reason` form of every other error: "The following
// argument was not expected: --bogus" -> {"--bogus", "unknown option"}; "--qlen: 1 required INT
// missing" -> {"--qlen", "1 required INT missing"}; "--request is required" -> {"--request",
// "is required"}; anything else keeps its text with no field.
std::pair<std::string, std::string> SplitParseError(const std::string& msg) {
  for (const char* lead : {"The following argument was not expected: ",
                           "The following arguments were not expected: "}) {
    const std::string l = lead;
    if (msg.rfind(l, 0) == 0) {  // CLI11 lists them last first
      std::vector<std::string> words;
      std::istringstream in(msg.substr(l.size()));
      for (std::string w; in >> w;) words.insert(words.begin(), w);
      if (words.empty()) break;
      std::string reason = words[0].rfind('-', 0) == 0 ? "unknown option" : "unexpected argument";
      // Every "raise it with --limit NAME=N" hint leads here when typed after the command.
      if (words[0] == "--limit")
        reason =
            "not an option of the command: --limit goes before it (mlasim --limit "
            "NAME=VALUE <command> ...; docs/limits.md)";
      for (size_t i = 1; i < words.size(); ++i)
        reason += (i == 1 ? " (also unexpected: " : " ") + words[i];
      if (words.size() > 1) reason += ")";
      return {words[0], reason};
    }
  }
  const std::string conv = "Could not convert: ";  // "Could not convert: --seed = abc"
  if (msg.rfind(conv, 0) == 0) {
    const std::string rest = msg.substr(conv.size());
    const size_t eq = rest.find(" = ");
    if (eq != std::string::npos) {
      const std::string value = rest.substr(eq + 3);
      if (ref::IsDecimalBeyond64Bits(value))
        return {rest.substr(0, eq), ref::Beyond64BitsText(value)};
      const bool integer =
          !value.empty() && value.find_first_not_of("+-0123456789") == std::string::npos;
      return {rest.substr(0, eq), "'" + value +
                                      (integer ? "' is outside this option's integer range"
                                               : "' is not a valid value")};
    }
  }
  const std::string at_most = "At Most ";  // "--heads: At Most 1 required but received 2"
  if (const size_t p = msg.find(": " + at_most); p != std::string::npos && msg[0] == '-')
    return {msg.substr(0, p), "given more than once"};
  if (!msg.empty() && msg[0] == '-') {
    const size_t colon = msg.find(": ");
    const size_t space = msg.find(' ');
    if (colon != std::string::npos && colon < space)
      return {msg.substr(0, colon), msg.substr(colon + 2)};
    if (space != std::string::npos) {
      const std::string reason = msg.substr(space + 1);
      return {msg.substr(0, space), reason == "is required" ? "required" : reason};
    }
  }
  // A positional argument: "DIR is required", "CASE_DIR is required".
  const std::string required = " is required";
  if (msg.size() > required.size() && msg.find(' ') == msg.size() - required.size() &&
      msg.compare(msg.size() - required.size(), required.size(), required) == 0)
    return {msg.substr(0, msg.size() - required.size()), "required"};
  return {"", msg};
}

// Type names of the options whose values are integers (CLI11's defaults and ours).
bool IntegerOption(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  return t == "INT" || t == "UINT" || t == "N" || t == "SEED" || t.rfind("INT=", 0) == 0 ||
         t.rfind("UINT=", 0) == 0;
}

// The first integer option of the parsed command (or its parsed subcommands) given a value
// beyond 64 bits: CLI11 would saturate it (int64) or call it "not a valid value" (int32).
// {flag, reason}, or two empty strings.
std::pair<std::string, std::string> FindBeyond64Bits(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* o : sub->get_options()) {
      if (!IntegerOption(*o)) continue;
      for (const std::string& v : o->results())
        if (ref::IsDecimalBeyond64Bits(v)) return {o->get_name(), ref::Beyond64BitsText(v)};
    }
    if (auto found = FindBeyond64Bits(*sub); !found.first.empty()) return found;
  }
  return {};
}

// CLI11 converts an integer option's text with strtoll(base 0): "010" would be 8, "0x10" 16 and
// "+16" 16, where every flag mlasim parses itself reads decimal ("--heads 016" is 16). This
// transform, run before the conversion, gives such text its decimal meaning: leading zeros (and
// blanks around the number) are dropped ("010" is 10). Any other text (0x10, +16, 1e3, 1.5, abc)
// is refused naming the option in one wording, "'TEXT' is not a decimal integer" (the one of
// --limit and --kernel-config too); empty text is left to EmptyValuedOption.
CLI::Validator DecimalInteger() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const size_t b = v.find_first_not_of(" \t");
        if (b == std::string::npos) return "";
        const std::string t = v.substr(b, v.find_last_not_of(" \t") - b + 1);
        const size_t digits = t[0] == '-' ? 1 : 0;
        if (t.size() == digits || t.find_first_not_of("0123456789", digits) != std::string::npos)
          return "'" + v + "' is not a decimal integer";
        const size_t nonzero = std::min(t.find_first_not_of('0', digits), t.size() - 1);
        v = (digits ? "-" : "") + t.substr(nonzero);
        if (v == "-0") v = "0";
        return "";
      },
      "", "decimal");
}

// Puts DecimalInteger in front of every integer option of `app`'s subcommands, nested ones
// included ("SEED" options take 0x-hex on purpose and read it themselves).
void ReadIntegersAsDecimal(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* o : sub->get_options([](CLI::Option*) { return true; }))
      if (IntegerOption(*o) && o->get_type_name() != "SEED") o->transform(DecimalInteger());
    ReadIntegersAsDecimal(*sub);
  }
}

}  // namespace

namespace {
// Control characters from user input (a JSON key with a newline or NUL) as \xNN, so an error
// stays one printable line.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}
}  // namespace

void PrintError(std::ostream& err, const std::string& command, const std::string& field,
                const std::string& reason) {
  err << "mlasim";
  if (!command.empty()) err << ' ' << command;
  err << ": error: ";
  if (!field.empty()) err << Printable(field) << ": ";
  err << Printable(reason) << '\n';
}

CLI::Validator UnsignedInteger() {
  // DecimalInteger's reading first (blanks and leading zeros dropped, one wording for any other
  // text), then the sign and the 64 bits.
  const CLI::Validator decimal = DecimalInteger();
  return CLI::Validator(
      [decimal](std::string& v) -> std::string {
        const std::string given = v;
        if (std::string why = decimal(v); !why.empty()) return why;
        if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
          return "'" + given + "' is not a non-negative decimal integer";
        if (ref::IsDecimalBeyond64Bits(v)) return ref::Beyond64BitsText(v);
        return "";
      },
      "UINT64");
}

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == StatusCode::kInternal ? kExitInternal : kExitBadInput;
}

namespace {

// -1 when `word` (argv[1], not a flag) names a command; else prints why (CLI11 would report an
// unknown command word as "a subcommand is required") and returns kExitBadInput.
int CheckCommandWord(const char* word, const std::vector<std::unique_ptr<Command>>& commands,
                     std::ostream& err) {
  for (const auto& c : commands)
    if (c->app()->check_name(word)) return -1;
  std::string names;
  for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c->app()->get_name();
  PrintError(err, "", "",
             std::string("unknown command '") + word + "' (expected one of: " + names +
                 "; run 'mlasim --help' for usage)");
  return kExitBadInput;
}

// -1 when what comes before the command is mlasim's own options and the first other word names a
// command; else prints why and returns kExitBadInput: an unknown option is named (CLI11 would
// report only that no command was given), and so is any word after --version (CLI11 printed the
// version and exited 0 whatever followed: `mlasim --version extra`).
int CheckBeforeCommand(int argc, char** argv, const std::vector<std::unique_ptr<Command>>& commands,
                       std::ostream& err) {
  bool version = false;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string a = argv[i];
    if (a == "--limit") {
      ++i;  // its value
      continue;
    }
    version = version || a == "--version";
    if (a == "-h" || a == "--help" || a == "--version" || a.rfind("--limit=", 0) == 0) continue;
    PrintError(err, "", a,
               "not an option of mlasim (before the command: --limit, --version, --help; a "
               "command's own options go after it)");
    return kExitBadInput;
  }
  if (i >= argc) return -1;
  if (version) {
    PrintError(err, "", "--version",
               std::string("takes no command or other argument (got '") + argv[i] +
                   "'; run 'mlasim --version' alone)");
    return kExitBadInput;
  }
  return CheckCommandWord(argv[i], commands, err);
}

// Parses argv into `app`: -1 when the command is to run, else the exit code (help, version, or
// a parse error printed naming the flag: kExitBadInput).
int Parse(CLI::App& app, int argc, char** argv, std::ostream& out, std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    const std::string cmd = SelectedCommand(app);
    if (const auto [flag, why] = FindBeyond64Bits(app); !flag.empty()) {
      PrintError(err, cmd, flag, why);
      return kExitBadInput;
    }
    const auto [field, reason] = SplitParseError(e.what());
    PrintError(err, cmd, field,
               reason + " (run 'mlasim" + (cmd.empty() ? "" : " " + cmd) + " --help' for usage)");
    return kExitBadInput;
  }
  if (const auto [flag, why] = FindBeyond64Bits(app); !flag.empty()) {
    PrintError(err, SelectedCommand(app), flag, why);
    return kExitBadInput;
  }
  return -1;
}

// Every invocation starts from the default limits (tests run many in one process), then the
// environment, then --limit. False (the error printed) on a bad limit.
bool SetRunLimits(const std::vector<std::string>& limits, std::ostream& err) {
  ref::ResetLimits();
  if (Status st = ref::SetLimitsFromEnvironment(); !st.ok()) {
    PrintError(err, "", st.field(), st.message());
    return false;
  }
  // Every --limit as one list, so that a limit given in two flags is refused as a limit given
  // twice in one (the last won before).
  std::string all;
  for (size_t i = 0; i < limits.size(); ++i) {
    if (limits[i].find_first_not_of(" \t") == std::string::npos) {
      PrintError(err, "", "--limit", "must not be empty");
      return false;
    }
    all += (i ? "," : "") + limits[i];
  }
  if (Status st = ref::SetLimits(all, "--limit"); !st.ok()) {
    PrintError(err, "", st.field(), st.message());
    return false;
  }
  return true;
}

// The first option of `app` that takes a value but was given an empty one (--profile ""), or
// nullptr: refused rather than treated as not given.
const CLI::Option* EmptyValuedOption(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_expected_min() < 1) continue;
    for (const std::string& v : opt->results())
      if (v.empty()) return opt;
  }
  return nullptr;
}

// Runs the parsed command `c`: its exit code; an exception is an internal error (exit 3).
int RunCommand(Command& c, std::ostream& out, std::ostream& err) {
  if (const CLI::Option* opt = EmptyValuedOption(*c.app())) {
    PrintError(err, c.app()->get_name(), opt->get_name(), "must not be empty");
    return kExitBadInput;
  }
  const Streams io{out, err};
  try {
    return c.Run(io);
  } catch (const std::bad_alloc&) {
    PrintError(err, c.app()->get_name(), "", "internal: out of memory");
    return kExitInternal;
  } catch (const std::exception& e) {
    PrintError(err, c.app()->get_name(), "", std::string("internal: ") + e.what());
    return kExitInternal;
  }
}

}  // namespace

int RunMlasim(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app("mlasim: a deterministic simulator and checker for aiter's MLA decode metadata",
               "mlasim");
  app.set_version_flag("--version", VersionString(), "Print the version and exit");
  app.require_subcommand(1);
  app.fallthrough(false);
  // ref/limits.h: one table of size limits for every command, raised per run (docs/limits.md).
  std::vector<std::string> limits;
  app.add_option("--limit", limits,
                 "Raise (or lower) a size limit for this run, e.g. --limit requests=2000000 "
                 "(repeatable; before the command; also $MLASIM_LIMITS; docs/limits.md)")
      ->type_name("NAME=VALUE");
  std::vector<std::unique_ptr<Command>> commands;
  for (RegisterFn reg : kCommands) commands.push_back(reg(app));
  ReadIntegersAsDecimal(app);

  if (const int code = CheckBeforeCommand(argc, argv, commands, err); code >= 0) return code;
  if (const int code = Parse(app, argc, argv, out, err); code >= 0) return code;
  if (!SetRunLimits(limits, err)) return kExitBadInput;
  for (const auto& c : commands)
    if (c->app()->parsed()) return RunCommand(*c, out, err);
  PrintError(err, "", "", "no subcommand given (run 'mlasim --help' for usage)");
  return kExitBadInput;
}

int RunMlasim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.emplace_back("mlasim");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  return RunMlasim(static_cast<int>(storage.size()), argv.data(), out, err);
}

}  // namespace mlasim::cli

// Command-line flags made from one of the library's option tables
// (ReaderOptionList, ConvertOptionList): --name with '-' for '_', help with
// what the option accepts and its default, the value passed through as
// text, in the order written, for the library to parse and check. A front
// adds no option of its own this way.
#ifndef LMDBLOADER_TOOLS_OPTION_FLAGS_H_
#define LMDBLOADER_TOOLS_OPTION_FLAGS_H_

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// (option name, text), in the order given on the command line.
using GivenOptions = std::vector<std::pair<std::string, std::string>>;

// How the command spells an option when not --name: a positional argument
// ("source"), another flag ("--from"), or "" for none (the command sets it).
using FlagSpellings = std::map<std::string, std::string>;

inline std::string FlagName(const std::string& option) {
  std::string flag = "--" + option;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// How the command spells `option`: as `spellings` says, else --name.
inline std::string FlagFor(const std::string& option, const FlagSpellings& spellings = {}) {
  const auto spelled = spellings.find(option);
  return spelled == spellings.end() ? FlagName(option) : spelled->second;
}

// Sets each given option with `set` (SetReaderOption, SetConvertOption), in
// order: InvalidArgument naming the flag as the command spells it and the
// text given for the first bad one.
template <typename Options>
Status ApplyGivenOptions(const GivenOptions& given, Status (*set)(std::string_view, std::string_view, Options*),
                         Options* options, const FlagSpellings& spellings = {}) {
  for (const auto& [name, text] : given) {
    Status s = set(name, text, options);
    if (!s.ok()) return Status::InvalidArgument(FlagFor(name, spellings) + " " + text + ": " + s.message());
  }
  return Status::OK();
}

// Registers every option of `list` on `cmd`. `default_of(name)` gives the
// default shown in help; options spelled as positionals or by `--from` are
// required.
inline void AddOptionFlags(CLI::App* cmd, const std::vector<OptionInfo>& list,
                           const std::function<std::string(const std::string&)>& default_of, GivenOptions* given,
                           const FlagSpellings& spellings = {}) {
  for (const OptionInfo& o : list) {
    const std::string name = o.name;
    const auto spelled = spellings.find(name);
    const std::string flag = spelled == spellings.end() ? FlagName(name) : spelled->second;
    if (flag.empty()) continue;
    const std::string defaults = default_of(name);
    std::string help = std::string(o.help) + " [" + o.values;
    if (spelled == spellings.end()) help += "; default " + (defaults.empty() ? std::string("empty") : defaults);
    help += "]";
    if (std::string(o.kind) == "bool" && spelled == spellings.end()) {
      // CLI11 passes the flag's count, negative for --flag=false (or =0).
      cmd->add_flag_function(
          flag, [given, name](int64_t count) { given->emplace_back(name, count > 0 ? "true" : "false"); }, help);
      continue;
    }
    CLI::Option* added = cmd->add_option_function<std::string>(
        flag, [given, name](const std::string& v) { given->emplace_back(name, v); }, help);
    if (spelled != spellings.end()) added->required();
  }
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_TOOLS_OPTION_FLAGS_H_

#include "tools/convert_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "lmdbloader/convert.h"
#include "lmdbloader/shard_set.h"
#include "tools/option_flags.h"
#include "tools/report_json.h"

namespace lmdbloader {
namespace {

struct ConvertFlags {
  GivenOptions given;
  bool as_json = false;
  bool no_progress = false;
  std::string shard_list_dir;
};
ConvertFlags flags;
CLI::App* convert_cmd = nullptr;
const FlagSpellings kSpellings = {{"kind", "--from"}, {"source", "source"}, {"output", "output"}, {"progress", ""}};
CLI::App* shard_list_cmd = nullptr;

}  // namespace

void ConvertCommand::Register(CLI::App* app) {
  convert_cmd = app->add_subcommand("convert", "write a corpus from image folders, video frame folders, "
                                               "a JSONL manifest or an existing LMDB");
  // Every option of the library's list (ConvertOptionList); the source and
  // output are positional, the kind is --from, and the progress line is the
  // command's own choice (--no-progress, and only on a terminal).
  AddOptionFlags(convert_cmd, ConvertOptionList(),
                 [](const std::string& name) { return ConvertOptionValue(ConvertOptions(), name); }, &flags.given,
                 kSpellings);
  convert_cmd->add_flag("--json", flags.as_json, "print the summary as JSON");
  convert_cmd->add_flag("--no-progress", flags.no_progress, "no progress line on stderr");

  shard_list_cmd = app->add_subcommand("shard-list", "write shards.json for a folder of part-* shards");
  shard_list_cmd->add_option("folder", flags.shard_list_dir, "folder holding part-NNNNN-of-NNNNN corpora")->required();
}

int ConvertCommand::Run() {
  if (shard_list_cmd && *shard_list_cmd) {
    uint64_t records = 0;
    Status s = WriteShardList(flags.shard_list_dir, &records);
    if (!s.ok()) {
      std::fprintf(stderr, "lmdbloader: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("%s/shards.json: %llu records\n", flags.shard_list_dir.c_str(), (unsigned long long)records);
    return 0;
  }
  ConvertOptions o;
  Status given = ApplyGivenOptions(flags.given, &SetConvertOption, &o, kSpellings);
  if (!given.ok()) {
    std::fprintf(stderr, "lmdbloader convert: %s\n", given.message().c_str());
    return 1;  // as every failure of convert
  }
  o.progress = !flags.no_progress && ::isatty(2);
  ConvertSummary summary;
  Status s = Convert(o, &summary);
  if (!s.ok()) {
    std::fprintf(stderr, "lmdbloader convert: %s\n", s.ToString().c_str());
    return 1;
  }
  nlohmann::json out = {{"mb_per_s", summary.seconds > 0 ? summary.bytes / summary.seconds / 1e6 : 0.0}};
  AddReportFields(summary, &out);
  if (flags.as_json) {
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::printf("wrote %llu records, %.1f MB in %.2f s (%.1f MB/s) to %s\n", (unsigned long long)summary.records,
                summary.bytes / 1e6, summary.seconds, out["mb_per_s"].get<double>(), o.output.c_str());
    for (const auto& skipped : summary.skipped) std::printf("skipped: %s\n", skipped.c_str());
  }
  return 0;
}

}  // namespace lmdbloader

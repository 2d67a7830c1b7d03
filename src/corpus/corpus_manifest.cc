#include "corpus/corpus_manifest.h"

#include <nlohmann/json.hpp>

#include "base/checksum.h"
#include "corpus/corpus_format.h"

namespace lmdbloader {

namespace {

bool ParseHex64(const nlohmann::json& hex, uint64_t* out) {
  if (!hex.is_string() || hex.get_ref<const std::string&>().size() != 16) return false;
  uint64_t v = 0;
  for (char ch : hex.get_ref<const std::string&>()) {
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

Status ParseCorpusManifest(const std::string& text, const std::string& where, CorpusManifest* out) {
  auto damaged = [&](const std::string& what) { return Status::Corruption("corpus " + where + ": " + what); };
  *out = CorpusManifest();
  const nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object() || !m.contains("format") || m["format"] != kCorpusFormatName)
    return Status::NotFound("corpus " + where + ": the manifest is not a corpus manifest (damaged or not JSON)");
  if (!m.contains("records") || !m["records"].is_number_unsigned())
    return damaged("the manifest's 'records' is not a non-negative integer");
  out->records = m["records"].get<uint64_t>();
  if (m.contains("keys")) {
    if (!m["keys"].is_string()) return damaged("the manifest's 'keys' is not a string");
    const std::string& keys = m["keys"].get_ref<const std::string&>();
    if (keys == kCorpusKeysNames) out->keys = CorpusKeys::kNames;
    else if (keys != kCorpusKeysNumbers)
      return Status::Unsupported("corpus " + where + ": records keyed by '" + keys + "' (this reader knows '" +
                                 kCorpusKeysNumbers + "' and '" + kCorpusKeysNames + "')");
  }
  if (m.contains("columns")) {
    if (!m["columns"].is_object()) return damaged("the manifest's 'columns' is not an object");
    for (const auto& [name, column] : m["columns"].items()) {
      if (!column.is_object() || !column.contains("dtype") || !column["dtype"].is_string() ||
          (column["dtype"] != "<i8" && column["dtype"] != "<f8"))
        return damaged("column '" + name + "' has no dtype of <i8 or <f8");
      out->column_dtypes[name] = column["dtype"].get<std::string>();
    }
  }
  if (m.contains("checksums")) {
    const auto& sums = m["checksums"];
    if (!sums.is_object() || !sums.contains("algorithm") || !sums["algorithm"].is_string() ||
        !sums.contains("meta") || !sums["meta"].is_object())
      return damaged("the manifest's 'checksums' is malformed");
    if (sums["algorithm"] != kChecksumAlgorithm)
      return Status::Unsupported("corpus " + where + ": checksum algorithm '" +
                                 sums["algorithm"].get<std::string>() + "' is unknown (this reader knows " +
                                 kChecksumAlgorithm + ")");
    for (const auto& [key, hex] : sums["meta"].items()) {
      uint64_t v = 0;
      if (!ParseHex64(hex, &v)) return damaged("the checksum of " + key + " is malformed");
      out->meta_sums[std::string(kMetaPrefix) + key] = v;
    }
    out->has_checksums = true;
  }
  return Status::OK();
}

}  // namespace lmdbloader

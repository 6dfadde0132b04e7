// Tokenizer benchmark: load time, single-thread encode MB/s on the english/chinese/code corpus sets, 30-character
// prompt latency, multi-thread batch scaling and the memory of the loaded tokenizer. Numbers go to
// docs/PERFORMANCE.md next to HF's from tools/tokenizer_reference.py on the same machine.
// usage: tokenizer_bench --tokenizer tokenizer.json --corpus tests/data/tokenizer/corpus
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<std::string> read_docs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> docs;
  std::string line;
  while (std::getline(in, line)) docs.push_back(nlohmann::json::parse(line).get<std::string>());
  return docs;
}

size_t total_bytes(const std::vector<std::string>& docs) {
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  return bytes;
}

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    long value = 0;
    if (key == "VmRSS:" && status >> value) return value;
  }
  return 0;
}

// Best of `rounds` single-thread passes over docs, in MB/s.
double encode_mbps(const qinfer::Tokenizer& tokenizer, const std::vector<std::string>& docs, int rounds) {
  double best = 1e30;
  size_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (const auto& doc : docs) sink += tokenizer.encode(doc).size();
    best = std::min(best, seconds_since(start));
  }
  if (sink == 0) std::printf("(no tokens)\n");
  return static_cast<double>(total_bytes(docs)) / best / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path = ".assets/qwen3-tokenizer/tokenizer.json";
  std::string corpus = "tests/data/tokenizer/corpus";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokenizer") tokenizer_path = argv[i + 1];
    if (flag == "--corpus") corpus = argv[i + 1];
  }
  try {
    const long rss_before = resident_kib();
    auto start = Clock::now();
    qinfer::Tokenizer tokenizer = qinfer::Tokenizer::from_file(tokenizer_path);
    const double first_load_ms = seconds_since(start) * 1e3;
    const long rss_loaded = resident_kib();
    double best_load_ms = first_load_ms;
    for (int i = 0; i < 4; ++i) {
      start = Clock::now();
      qinfer::Tokenizer again = qinfer::Tokenizer::from_file(tokenizer_path);
      best_load_ms = std::min(best_load_ms, seconds_since(start) * 1e3);
    }
    std::printf("load_ms_first %.1f\nload_ms_best_of_5 %.1f\nloaded_tokenizer_rss_mib %.1f\n", first_load_ms,
                best_load_ms, (rss_loaded - rss_before) / 1024.0);

    std::vector<std::string> all_docs;
    for (const char* set : {"english", "chinese", "code"}) {
      const auto docs = read_docs(corpus + "/" + set + ".jsonl");
      std::printf("%s_MBps %.1f  (%zu bytes, 1 thread, best of 3)\n", set, encode_mbps(tokenizer, docs, 3),
                  total_bytes(docs));
      all_docs.insert(all_docs.end(), docs.begin(), docs.end());
    }

    const std::string prompt = "What is the capital of France?";  // 30 characters
    std::vector<double> samples;
    for (int i = 0; i < 20000; ++i) {
      start = Clock::now();
      const auto ids = tokenizer.encode(prompt);
      samples.push_back(seconds_since(start) * 1e6);
      if (ids.empty()) return 1;
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    std::printf("prompt30_us_median %.2f\n", samples[samples.size() / 2]);

    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const double all_bytes = static_cast<double>(total_bytes(all_docs));
    for (int threads = 1; threads <= hardware; threads *= 2) {
      qinfer::ThreadPool pool(threads);
      double best = 1e30;
      for (int r = 0; r < 3; ++r) {
        start = Clock::now();
        pool.parallel_for(all_docs.size(), [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) tokenizer.encode(all_docs[i]);
        });
        best = std::min(best, seconds_since(start));
      }
      std::printf("batch_threads %d MBps %.1f\n", threads, all_bytes / best / 1e6);
    }
    std::printf("peak_rss_mib %.1f\n", resident_kib() / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

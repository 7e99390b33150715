// RunLog (see run_log.hpp): every record of the run, written by rank 0.
#include "train/run_log.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/limits.hpp"
#include "metrics/jsonl.hpp"
#include "metrics/progress.hpp"
#include "metrics/tensorboard.hpp"

namespace dtrain {

RunLog::RunLog(Facts facts) : facts_(std::move(facts)) {}

RunLog::~RunLog() = default;

void RunLog::open(const std::string& run_dir, const std::string& events) {
  jsonl_ = std::make_unique<JsonlWriter>(run_dir + "/metrics.jsonl");
  tb_ = std::make_unique<TensorBoardWriter>(run_dir, events);
}

LogMarks RunLog::marks() const {
  if (!jsonl_) return {};
  return {jsonl_->bytes(), std::filesystem::path(tb_->path()).filename().string(), tb_->bytes()};
}

void RunLog::write(const Json& record) {
  if (jsonl_) jsonl_->write(record);
}

void RunLog::checkpoint_load(int64_t step, double seconds, int64_t bytes_read) {
  Json j = Json::object();
  j["type"] = "checkpoint_load";
  j["step"] = step;
  j["seconds"] = seconds;
  j["bytes_read"] = bytes_read;  // by rank 0
  write(j);
}

void RunLog::checkpoint(int64_t step, bool sharded, bool async, int64_t bytes, double stall_seconds) {
  Json j = Json::object();
  j["type"] = "checkpoint";
  j["step"] = step;
  j["format"] = sharded ? "sharded" : "full";
  j["async"] = async;
  j["bytes"] = bytes;  // the whole checkpoint, every rank's share
  j["stall_seconds"] = stall_seconds;
  write(j);
}

void RunLog::checkpoint_written(int64_t step, double write_seconds) {
  Json j = Json::object();
  j["type"] = "checkpoint_written";
  j["step"] = step;
  j["write_seconds"] = write_seconds;
  write(j);
}

void RunLog::count_step(int64_t rows, double seconds) {
  window_rows_ += rows;
  window_seconds_ += seconds;
  ++window_steps_;
}

void RunLog::train(Json j, int64_t step, int64_t epoch, double loss, const StepFigures& s, const PhaseSeconds& phases) {
  const double rows_per_second = window_seconds_ > 0 ? double(window_rows_) / window_seconds_ : 0.0;
  window_rows_ = 0;
  window_seconds_ = 0.0;
  window_steps_ = 0;
  if (!jsonl_) return;
  j["type"] = "train";
  j["step"] = step;
  j["epoch"] = epoch;
  j["loss"] = loss;
  j["lr"] = s.lr;
  j["tokens_per_s"] = rows_per_second;
  j["samples_per_s"] = rows_per_second / double(facts_.rows_per_sample);
  const double tflops = add_compute_rate(j, rows_per_second);
  if (facts_.grad_clip) j["grad_norm"] = s.norm;
  jsonl_->write(j);
  tb_->add_scalar("Loss/train_step", float(loss), step);
  tb_->add_scalar("Train/lr", s.lr, step);
  if (facts_.grad_clip) tb_->add_scalar("Train/grad_norm", float(s.norm), step);
  const bool tokens = facts_.row_unit == "tokens";
  tb_->add_scalar(tokens ? "Throughput/tokens_per_s" : "Throughput/samples_per_s",
                  float(tokens ? rows_per_second : j["samples_per_s"].get<double>()), step);
  tb_->add_scalar("Throughput/tflops_per_rank", float(tflops), step);
  if (!j["mfu"].is_null()) tb_->add_scalar("Throughput/mfu", j["mfu"].get<float>(), step);
  for (int i = 0; i < kPhases; ++i)
    tb_->add_scalar(std::string("Phases/") + phase_name(Phase(i)) + "_ms", float(1e3 * phases[size_t(i)]), step);
  tb_->add_scalar("Memory/peak_rss_mb", float(peak_rss_mb()), step);
}

void RunLog::expert_load(Json& j, const ExpertLoad& load, int64_t step) {
  if (load.empty() || !jsonl_) return;
  const double steps = double(std::max<int64_t>(window_steps_, 1));
  Json tokens = Json::array(), imbalance = Json::array();
  for (int64_t l = 0; l < load.layers; ++l) {
    Json row = Json::array();
    double most = 0.0, sum = 0.0;
    for (int64_t e = 0; e < load.experts; ++e) {
      const double t = load.tokens[size_t(l * load.experts + e)];
      row.push_back(t / steps);
      most = std::max(most, t);
      sum += t;
    }
    tokens.push_back(row);
    const double ratio = sum > 0 ? most / (sum / double(load.experts)) : 0.0;
    imbalance.push_back(ratio);
    tb_->add_scalar("MoE/imbalance_layer" + std::to_string(l), float(ratio), step);
  }
  j["aux_loss"] = load.samples > 0 ? load.balance_loss / load.samples : 0.0;
  j["tokens_per_expert"] = tokens;
  j["expert_imbalance"] = imbalance;
  if (load.capacity) {  // per layer, per step
    Json dropped = Json::array();
    double all = 0.0;
    for (double v : load.dropped) {
      dropped.push_back(v / steps);
      all += v / steps;
    }
    j["dropped_tokens"] = dropped;
    tb_->add_scalar("MoE/dropped_tokens", float(all), step);
  }
  tb_->add_scalar("MoE/aux_loss", j["aux_loss"].get<float>(), step);
}

void RunLog::eval(const char* split, int64_t step, int64_t epoch, const EvalResult& r) {
  if (!jsonl_) return;
  Json j = Json::object();
  j["type"] = split;
  j["step"] = step;
  j["epoch"] = epoch;
  j["loss"] = r.loss;
  j[metric_key()] = metric_value(facts_.metric, r);
  for (const EvalResult::Part& p : r.parts) {  // a mix: each source's validation
    const EvalResult part{p.loss, p.rows, p.metric, {}};
    j["sources"][p.name] = Json{{"loss", p.loss}, {metric_key(), metric_value(facts_.metric, part)}, {"rows", p.rows}};
  }
  jsonl_->write(j);
}

void RunLog::epoch(int64_t step, const EpochFigures& e) {
  if (!jsonl_) return;
  const Metric m = facts_.metric;
  const bool accuracy = m == Metric::accuracy;  // a classifier's line carries it, as the course's MNIST prints it
  std::printf("[%lld/%lld] Train loss: %.5f, Validation loss: %.5f%s%s%s\n", (long long)e.epoch, (long long)e.epochs,
              e.train_loss, e.valid.loss, accuracy ? ", Validation accuracy: " : "",
              accuracy ? metric_text(m, e.valid).c_str() : "", e.whole ? "" : " (partial epoch)");
  std::printf("      epoch time %s, %.0f %s/s, val %s %s\n", format_duration(e.seconds).c_str(), e.rows_per_second,
              facts_.row_unit.c_str(), metric_key(), metric_text(m, e.valid).c_str());
  std::fflush(stdout);
  Json j = Json::object();
  j["type"] = "epoch";
  j["step"] = step;
  j["epoch"] = e.epoch;
  j["train_loss"] = e.train_loss;
  j["val_loss"] = e.valid.loss;
  j[std::string("val_") + metric_key()] = metric_value(m, e.valid);
  j["tokens_per_s"] = e.rows_per_second;
  j["epoch_seconds"] = e.seconds;
  jsonl_->write(j);
  tb_->add_scalar("Loss/train", float(e.train_loss), e.epoch);
  tb_->add_scalar("Loss/val", float(e.valid.loss), e.epoch);
  tb_->add_scalar(std::string(metric_group()) + "/val", float(metric_value(m, e.valid)), e.epoch);
}

void RunLog::test_scalars(int64_t step, const EvalResult& r) {
  if (!tb_) return;
  tb_->add_scalar("Loss/test", float(r.loss), step);
  tb_->add_scalar(std::string(metric_group()) + "/test", float(metric_value(facts_.metric, r)), step);
}

void RunLog::flush() {
  if (tb_) tb_->flush();
}

double RunLog::add_compute_rate(Json& j, double rows_per_second) const {
  const double tflops =
      facts_.flops_per_sample / double(facts_.rows_per_sample) * rows_per_second / double(facts_.ranks) / 1e12;
  const double peak = facts_.peak_tflops;
  j["tflops_per_rank"] = tflops;
  j["mfu"] = peak > 0 ? Json(tflops / peak) : Json(nullptr);
  return tflops;
}

const char* RunLog::metric_key() const { return facts_.metric == Metric::accuracy ? "accuracy" : "ppl"; }

const char* RunLog::metric_group() const { return facts_.metric == Metric::accuracy ? "Accuracy" : "Perplexity"; }

}  // namespace dtrain

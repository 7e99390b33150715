// Trainer (see trainer.hpp): the step loop and everything around it.
#include "train/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "data/loader.hpp"
#include "data/prepare.hpp"
#include "data/sampler.hpp"
#include "metrics/jsonl.hpp"
#include "metrics/progress.hpp"
#include "metrics/tensorboard.hpp"

namespace fs = std::filesystem;

namespace dtrain {

int configure_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  return omp_get_max_threads();
}

EvalResult evaluate(TransformerLM& model, const WindowDataset& data, int64_t batch_size, int64_t max_batches,
                    Precision precision) {
  DistributedSampler sampler(data.size(), false, 0);
  BatchLoader loader(data, sampler, batch_size, false);
  loader.start_epoch();
  Batch b;
  double sum = 0.0;
  int64_t tokens = 0, n = 0;
  while ((max_batches == 0 || n < max_batches) && loader.next(b)) {
    StepContext ctx;
    ctx.B = b.rows;
    ctx.T = b.seq_len;
    ctx.precision = precision;
    sum += model.forward_loss(b.input.data(), b.target.data(), ctx);
    tokens += b.rows * b.seq_len;
    ++n;
  }
  return {tokens ? sum / double(tokens) : 0.0, tokens};
}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

struct Trainer::Impl {
  RunConfig cfg;
  std::string run_dir;
  std::string data_dir;
  TokenFile train_tokens, valid_tokens, test_tokens;
  std::unique_ptr<WindowDataset> train_set, valid_set, test_set;
  std::unique_ptr<TransformerLM> model;
  std::unique_ptr<Optimizer> opt;
  TrainerState st;
  Precision precision = Precision::f32;
  std::unique_ptr<JsonlWriter> jsonl;
  std::unique_ptr<TensorBoardWriter> tb;

  static TokenFile open_split(const std::string& dir, const std::string& split) {
    const std::string p = dir + "/" + split + ".bin";
    require(fs::exists(p), "data dir " + dir + " has no " + split + ".bin: prepare it with `dtrain data prepare "
                           "--input YOUR_TEXT --out " + dir + "` (or `dtrain data builtin --out " + dir + "`)");
    TokenFile f(p);
    f.check_ids();  // a corrupt id would index outside the embedding
    return f;
  }

  Impl(RunConfig c, std::string dir, bool resume)
      : cfg(std::move(c)),
        run_dir(std::move(dir)),
        data_dir(cfg.data.dir),
        train_tokens(open_split(data_dir, "train")),
        valid_tokens(open_split(data_dir, "valid")),
        test_tokens(open_split(data_dir, "test")) {
    cfg.model.vocab_size = train_tokens.vocab_size();
    cfg.validate();
    cfg.model.validate();
    precision = cfg.train.precision == "bf16" ? Precision::bf16 : Precision::f32;
    const int64_t T = cfg.model.seq_len;
    const int64_t eval_stride = cfg.data.eval_stride > 0 ? cfg.data.eval_stride : T;
    train_set = std::make_unique<WindowDataset>(train_tokens, T, cfg.data.stride);
    valid_set = std::make_unique<WindowDataset>(valid_tokens, T, eval_stride);
    test_set = std::make_unique<WindowDataset>(test_tokens, T, eval_stride);
    model = std::make_unique<TransformerLM>(cfg.model, cfg.train.batch_size);
    model->init_weights(cfg.train.seed);
    opt = std::make_unique<Optimizer>(cfg.optim, unit_shards(model->units()));
    require(resume || !fs::exists(run_dir + "/config.json"),
            "run dir " + run_dir + " already holds a run: continue it with `dtrain train --resume " + run_dir +
                "`, or choose another --run-dir");
    fs::create_directories(run_dir);
    if (resume) {
      const std::string ck = latest_checkpoint(run_dir);
      require(!ck.empty(), "run dir " + run_dir + " has no checkpoint to resume from: start it without --resume");
      load_checkpoint(ck, *model, opt.get(), &st);
      std::printf("resumed from %s (step %lld, epoch %lld)\n", ck.c_str(), (long long)st.global_step,
                  (long long)st.epoch + 1);
    }
    write_file_atomic(run_dir + "/config.json", cfg.to_json().dump(2));
    jsonl = std::make_unique<JsonlWriter>(run_dir + "/metrics.jsonl");
    tb = std::make_unique<TensorBoardWriter>(run_dir);
  }

  std::string vocab_path() const { return data_dir + "/vocab.txt"; }

  void checkpoint() {
    char name[32];
    std::snprintf(name, sizeof name, "step_%09lld", (long long)st.global_step);
    save_checkpoint(run_dir + "/checkpoints/" + name, *model, opt.get(), &st, cfg.to_json(), vocab_path());
    prune_checkpoints(run_dir, cfg.train.keep_checkpoints);
  }

  // epoch: the epoch the evaluation belongs to (1-based); the final test counts completed epochs
  void log_eval(const char* split, double loss, int64_t epoch) {
    Json j = Json::object();
    j["type"] = split;
    j["step"] = st.global_step;
    j["epoch"] = epoch;
    j["loss"] = loss;
    j["ppl"] = std::exp(loss);
    jsonl->write(j);
  }

  void run() {
    const int threads = configure_threads(cfg.train.threads);
    const int64_t T = cfg.model.seq_len, B = cfg.train.batch_size, E = cfg.train.epochs;
    DistributedSampler sampler(train_set->size(), cfg.data.shuffle, cfg.train.seed);
    BatchLoader loader(*train_set, sampler, B, false);
    const int64_t per_epoch = loader.num_batches();
    int64_t total = E > 0 ? E * per_epoch : cfg.train.max_steps;
    if (cfg.train.max_steps > 0) total = std::min(total, cfg.train.max_steps);
    const int64_t epochs = E > 0 ? E : (total + per_epoch - 1) / per_epoch;
    std::printf("model: %lld parameters (%s), vocab %lld, %lld train windows of %lld tokens; batch %lld, "
                "%lld steps/epoch, %d threads, %s\n",
                (long long)model->num_params(), cfg.model.pre_norm ? "pre-norm" : "post-norm",
                (long long)cfg.model.vocab_size, (long long)train_set->size(), (long long)T, (long long)B,
                (long long)per_epoch, threads,
                precision == Precision::f32 ? "f32"
                : cpu_has_native_bf16()     ? "bf16 (native avx512_bf16)"
                                            : "bf16 (no native bf16 on this CPU: slower)");
    std::fflush(stdout);
    ProgressLine progress(cfg.train.progress);
    Batch batch;
    bool stop = st.global_step >= total;
    while (!stop && st.epoch < epochs) {
      sampler.set_epoch(st.epoch);
      loader.start_epoch();
      for (int64_t skip = 0; skip < st.batch_in_epoch; ++skip) loader.next(batch);
      // what this epoch will run: the whole epoch, or up to train.max_steps
      const int64_t epoch_end = std::min(per_epoch, st.batch_in_epoch + (total - st.global_step));
      const auto epoch_start = Clock::now();
      int64_t epoch_tokens = 0;
      double epoch_step_seconds = 0.0;
      char prefix[64];
      std::snprintf(prefix, sizeof prefix, "[%lld/%lld]", (long long)st.epoch + 1, (long long)epochs);
      while (st.global_step < total && loader.next(batch)) {
        const auto t0 = Clock::now();
        StepContext ctx;
        ctx.B = batch.rows;
        ctx.T = T;
        ctx.training = true;
        ctx.dropout = cfg.model.dropout;
        ctx.seed = cfg.train.seed;
        ctx.step = uint32_t(st.global_step);
        ctx.loss_scale = 1.0f / float(batch.rows * T);
        ctx.precision = precision;
        model->zero_grad();
        const double loss = model->forward_backward(batch.input.data(), batch.target.data(), ctx) / double(batch.rows * T);
        require(std::isfinite(loss), "training diverged at step " + std::to_string(st.global_step) +
                                         " (loss is not finite): lower train.lr or set optim.grad_clip");
        double norm = 0.0;
        if (cfg.optim.grad_clip > 0) {
          norm = opt->grad_norm();
          if (norm > cfg.optim.grad_clip) opt->scale_grads(float(cfg.optim.grad_clip / (norm + 1e-6)));
        }
        const float lr = opt->lr_at(st.global_step, total);
        opt->step(lr);
        const double dt = seconds_since(t0);
        ++st.global_step;
        ++st.batch_in_epoch;
        st.epoch_loss_sum += loss;
        st.train_seconds += dt;
        st.train_tokens += batch.rows * T;
        epoch_tokens += batch.rows * T;
        epoch_step_seconds += dt;
        const double tps = epoch_step_seconds > 0 ? double(epoch_tokens) / epoch_step_seconds : 0.0;
        progress.update(prefix, st.batch_in_epoch, epoch_end, st.epoch_loss_sum / double(st.batch_in_epoch), tps);
        if (st.global_step % cfg.train.log_every == 0) {
          Json j = Json::object();
          j["type"] = "train";
          j["step"] = st.global_step;
          j["epoch"] = st.epoch + 1;
          j["loss"] = loss;
          j["lr"] = lr;
          j["tokens_per_s"] = tps;
          if (cfg.optim.grad_clip > 0) j["grad_norm"] = norm;
          jsonl->write(j);
          tb->add_scalar("Loss/train_step", float(loss), st.global_step);
        }
        if (cfg.train.eval_every > 0 && st.global_step % cfg.train.eval_every == 0) {
          const double v = evaluate(*model, *valid_set, B, cfg.train.eval_max_batches, precision).loss;
          log_eval("val", v, st.epoch + 1);
        }
        if (cfg.train.checkpoint_every > 0 && st.global_step % cfg.train.checkpoint_every == 0) checkpoint();
      }
      progress.clear();
      const bool epoch_done = st.batch_in_epoch >= per_epoch;
      stop = st.global_step >= total;
      if (st.batch_in_epoch == 0) break;
      const double train_loss = st.epoch_loss_sum / double(st.batch_in_epoch);
      const double val = evaluate(*model, *valid_set, B, cfg.train.eval_max_batches, precision).loss;
      const double tps = epoch_step_seconds > 0 ? double(epoch_tokens) / epoch_step_seconds : 0.0;
      std::printf("[%lld/%lld] Train loss: %.5f, Validation loss: %.5f%s\n", (long long)st.epoch + 1,
                  (long long)epochs, train_loss, val, epoch_done ? "" : " (partial epoch)");
      std::printf("      epoch time %s, %.0f tokens/s, val ppl %.2f\n",
                  format_duration(seconds_since(epoch_start)).c_str(), tps, std::exp(val));
      std::fflush(stdout);
      Json j = Json::object();
      j["type"] = "epoch";
      j["step"] = st.global_step;
      j["epoch"] = st.epoch + 1;
      j["train_loss"] = train_loss;
      j["val_loss"] = val;
      j["tokens_per_s"] = tps;
      j["epoch_seconds"] = seconds_since(epoch_start);
      jsonl->write(j);
      tb->add_scalar("Loss/train", float(train_loss), st.epoch + 1);
      tb->add_scalar("Loss/val", float(val), st.epoch + 1);
      if (val < st.best_val) {
        st.best_val = val;
        save_checkpoint(run_dir + "/model_best", *model, nullptr, &st, cfg.to_json(), vocab_path());
      }
      if (epoch_done) {
        ++st.epoch;
        st.batch_in_epoch = 0;
        st.epoch_loss_sum = 0.0;
      }
      checkpoint();
    }
    save_checkpoint(run_dir + "/model_final", *model, nullptr, &st, cfg.to_json(), vocab_path());
    const EvalResult test = evaluate(*model, *test_set, B, 0, precision);
    const double tps = st.train_seconds > 0 ? double(st.train_tokens) / st.train_seconds : 0.0;
    std::printf("Test loss: %.5f, test perplexity: %.2f (%lld tokens); trained %lld steps at %.0f tokens/s, "
                "peak memory %.0f MiB\n",
                test.loss, std::exp(test.loss), (long long)test.tokens, (long long)st.global_step, tps, peak_rss_mb());
    Json s = Json::object();
    s["test_loss"] = test.loss;
    s["test_ppl"] = std::exp(test.loss);
    s["best_val_loss"] = std::isfinite(st.best_val) ? Json(st.best_val) : Json(nullptr);
    s["steps"] = st.global_step;
    s["train_tokens"] = st.train_tokens;
    s["train_tokens_per_s"] = tps;
    s["train_flops_per_token"] = cfg.model.train_flops_per_token();
    s["peak_rss_mb"] = peak_rss_mb();
    s["threads"] = threads;
    s["precision"] = cfg.train.precision;
    s["parameters"] = model->num_params();
    write_file_atomic(run_dir + "/summary.json", s.dump(2) + "\n");
    log_eval("test", test.loss, st.epoch);
    tb->flush();
  }
};

Trainer::Trainer(RunConfig config, std::string run_dir, bool resume)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(run_dir), resume)) {}
Trainer::~Trainer() = default;
void Trainer::run() { impl_->run(); }

}  // namespace dtrain

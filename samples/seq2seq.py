"""A small attention seq2seq model (fluid 1.8's cell / decoder API) learning to copy sequences.

embedding -> GRU encoder (``layers.rnn`` over a ``GRUCell``) -> attention GRU decoder, trained
with teacher forcing (``TrainingHelper`` + ``BasicDecoder`` + ``dynamic_decode``) and decoded
with ``BeamSearchDecoder`` + ``dynamic_decode``. Both programs are static: ``rnn`` runs a
``StaticRNN`` and ``dynamic_decode`` a ``While`` loop over tensor arrays; they share their
parameters by name.

    python samples/seq2seq.py [--steps 300] [--beam 3]
"""
import argparse
import time

import numpy as np

import fluidlite as fluid

L = fluid.layers
START, END = 0, 1                  # token ids; content tokens are 2 .. VOCAB - 1
VOCAB, SRC_LEN, EMB, HID = 8, 4, 16, 32


class AttentionGRUCell(L.RNNCell):
    """GRU cell whose input is [x, context]; the context is dot-product attention of the previous
    hidden state over the encoder outputs (passed to ``call`` as ``encoder_output``)."""

    def __init__(self) -> None:
        self.gru = L.GRUCell(HID, param_attr=fluid.ParamAttr(name="dec_w"),
                             bias_attr=fluid.ParamAttr(name="dec_b"))

    def call(self, inputs, states, encoder_output):
        query = L.fc(states, HID, bias_attr=False, param_attr=fluid.ParamAttr(name="att_q"))
        scores = L.matmul(encoder_output, L.unsqueeze(query, [2]))        # [B, S, 1]
        weights = L.softmax(L.squeeze(scores, [2]))                        # [B, S]
        context = L.reduce_sum(L.elementwise_mul(encoder_output, L.unsqueeze(weights, [2])),
                               dim=1)                                      # [B, HID]
        out, new_state = self.gru(L.concat([inputs, context], 1), states)
        return L.concat([out, context], 1), new_state

    @property
    def state_shape(self):
        return [HID]


def embed(ids, name):
    return fluid.embedding(ids, [VOCAB, EMB], param_attr=fluid.ParamAttr(name=name))


def project(x):
    return L.fc(x, VOCAB, num_flatten_dims=len(x.shape) - 1,
                param_attr=fluid.ParamAttr(name="out_w"), bias_attr=fluid.ParamAttr(name="out_b"))


def encoder(src):
    cell = L.GRUCell(HID, param_attr=fluid.ParamAttr(name="enc_w"),
                     bias_attr=fluid.ParamAttr(name="enc_b"))
    enc_out, enc_state = L.rnn(cell, embed(src, "src_emb"))
    return enc_out, enc_state


def train_program():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup):
        src = fluid.data("src", [None, SRC_LEN], dtype="int64")
        trg_in = fluid.data("trg_in", [None, SRC_LEN + 1], dtype="int64")
        trg_out = fluid.data("trg_out", [None, SRC_LEN + 1], dtype="int64")
        trg_len = fluid.data("trg_len", [None], dtype="int64")
        enc_out, enc_state = encoder(src)
        helper = L.TrainingHelper(embed(trg_in, "trg_emb"), trg_len)
        decoder = L.BasicDecoder(AttentionGRUCell(), helper, output_fn=project)
        outputs, _ = L.dynamic_decode(decoder, inits=enc_state, encoder_output=enc_out)
        logits = outputs.cell_outputs                                      # [B, T, VOCAB]
        loss = L.mean(L.softmax_with_cross_entropy(logits, L.unsqueeze(trg_out, [2])))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return main, startup, loss


def infer_program(beam_size):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        src = fluid.data("src", [None, SRC_LEN], dtype="int64")
        enc_out, enc_state = encoder(src)
        enc_out = L.BeamSearchDecoder.tile_beam_merge_with_batch(enc_out, beam_size)
        decoder = L.BeamSearchDecoder(AttentionGRUCell(), START, END, beam_size,
                                      embedding_fn=lambda ids: embed(ids, "trg_emb"),
                                      output_fn=project)
        ids, _ = L.dynamic_decode(decoder, inits=enc_state, max_step_num=SRC_LEN + 2,
                                     encoder_output=enc_out)
    return main, ids                                                       # [B, T, beam]


def batch(rng, n):
    src = rng.integers(2, VOCAB, (n, SRC_LEN)).astype("int64")
    trg_in = np.concatenate([np.full((n, 1), START), src], 1).astype("int64")
    trg_out = np.concatenate([src, np.full((n, 1), END)], 1).astype("int64")
    return {"src": src, "trg_in": trg_in, "trg_out": trg_out,
            "trg_len": np.full(n, SRC_LEN + 1, "int64")}


def train(steps=300, batch_size=32, seed=0, log_every=0, target_loss=0.02):
    """Train until the loss averages below ``target_loss`` (or ``steps``); returns the scope,
    the executor and the losses."""
    rng = np.random.default_rng(seed)
    main, startup, loss = train_program()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for step in range(steps):
        losses.append(float(exe.run(main, feed=batch(rng, batch_size), fetch_list=[loss],
                                    scope=scope)[0].reshape(-1)[0]))
        if log_every and step % log_every == 0:
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
        if len(losses) >= 10 and np.mean(losses[-10:]) < target_loss:
            break
    return exe, scope, losses


def decode(exe, scope, src, beam_size=3):
    main, ids = infer_program(beam_size)
    out, = exe.run(main, feed={"src": src}, fetch_list=[ids], scope=scope)
    return out                                                             # [B, T, beam]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--beam", type=int, default=3)
    args = parser.parse_args()
    t0 = time.time()
    exe, scope, losses = train(args.steps, log_every=25)
    print(f"trained {len(losses)} steps in {time.time() - t0:.1f} s, final loss "
          f"{np.mean(losses[-10:]):.4f}")
    src = batch(np.random.default_rng(123), 5)["src"]
    ids = decode(exe, scope, src, args.beam)
    for s, beams in zip(src, ids.transpose(0, 2, 1)):
        best = [int(t) for t in beams[0] if t != END][:SRC_LEN]
        print("source", s.tolist(), "-> best beam", beams[0].tolist(),
              "copied" if best == s.tolist() else "WRONG")


if __name__ == "__main__":
    main()

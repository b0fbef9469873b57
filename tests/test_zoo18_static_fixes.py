"""fluidlite bugs the fluid 1.8 zoo's static NLP / recommendation models exposed
(tests/real/zoo18_static.py), each checked here without the zoo."""
import numpy as np

import fluidlite as fluid


def _lod(arr, lengths):
    return fluid.create_lod_tensor(arr, [lengths], fluid.CPUPlace())


def test_sequence_expand_as_grad_writes_only_x_grad():
    """PaddleRec/tagspace: ``sequence_expand_as(x=text_hid, y=neg_tag_emb)`` where Y (an
    embedding) needs a gradient from another path. Paddle's grad maker gives
    sequence_expand_as_grad the output X@GRAD only; fluidlite wrote Y@GRAD too and its kernel,
    which returns dX alone, failed with KeyError 'Y'. Y's gradient comes from its other use."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        y = fluid.data("y", [-1, 3], "float32", lod_level=1)
        hx = fluid.layers.fc(x, 3, bias_attr=False)
        hy = fluid.layers.fc(y, 3, bias_attr=False)      # needs a gradient: from `other`
        expanded = fluid.layers.sequence_expand_as(hx, hy)
        other = fluid.layers.reduce_sum(hy)
        loss = fluid.layers.reduce_sum(expanded) + 2.0 * other
        fluid.backward.append_backward(loss)
    grad_op = next(op for op in main.global_block().ops
                   if op.type == "sequence_expand_as_grad")
    assert grad_op.output_names == ["X@GRAD"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xs = np.arange(6, dtype="float32").reshape(2, 3)
    ys = np.ones((5, 3), "float32")
    dhx, dhy = exe.run(main, feed={"x": xs, "y": _lod(ys, [2, 3])},
                       fetch_list=[hx.name + "@GRAD", hy.name + "@GRAD"])
    # row i of hx is repeated len_i times, so its gradient is len_i; hy's comes from `other`
    np.testing.assert_array_equal(dhx, np.array([[2.0] * 3, [3.0] * 3], "float32"))
    np.testing.assert_array_equal(dhy, np.full((5, 3), 2.0, "float32"))


def test_lod_tensor_get_dims():
    """PaddleRec/multi_task (mmoe, share_bottom) reset their AUC states with
    ``np.zeros(scope.var(name).get_tensor()._get_dims())``: fluid 1.8's private Tensor method
    (pybind: the dims as a list); fluidlite's LoDTensor had none."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32")
        label = fluid.data("label", [-1, 1], "int64")
        _, _, states = fluid.layers.auc(fluid.layers.softmax(x), label)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        tensor = scope.var(states[0].name).get_tensor()
        assert tensor._get_dims() == list(np.array(tensor).shape)
        tensor.set(np.zeros(tensor._get_dims()).astype("int64"), fluid.CPUPlace())
        assert not np.array(tensor).any()


def test_split_writes_the_normalized_axis():
    """PaddleNLP/language_model (``rnn_model='static'``) splits LSTM gates with
    ``layers.split(gate_input, num_or_sections=4, dim=-1)``. fluid 1.8's ``split`` writes
    ``axis = rank + dim`` for a negative dim; fluidlite wrote -1, which Paddle 2.6 refuses
    ("Expected 0 >= idx") when it runs the saved inference program."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 8], "float32")
        parts = fluid.layers.split(x, num_or_sections=4, dim=-1)
        firsts = fluid.layers.split(x, num_or_sections=[3, 5], dim=1)
    axes = [op.attr("axis") for op in main.global_block().ops if op.type == "split"]
    assert axes == [1, 1]
    exe = fluid.Executor(fluid.CPUPlace())
    xs = np.arange(16, dtype="float32").reshape(2, 8)
    got = exe.run(main, feed={"x": xs}, fetch_list=parts + firsts)
    for g, w in zip(got, np.split(xs, 4, axis=1) + np.split(xs, [3], axis=1)):
        np.testing.assert_array_equal(g, w)


def _beam_decoder(L, beam_size=3):
    emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
    out_fn = lambda h: L.fc(h, size=10, num_flatten_dims=len(h.shape) - 1, param_attr="out_w")
    return L.BeamSearchDecoder(L.GRUCell(hidden_size=8), start_token=0, end_token=1,
                               beam_size=beam_size, embedding_fn=emb, output_fn=out_fn)


def test_dynamic_decode_returns_a_pair_unless_return_length():
    """PaddleNLP/seq2seq's infer.py: ``outputs, _ = dynamic_decode(beam_search_decoder, ...)``.
    fluid 1.8.0 returns ``(final_outputs, final_states)``, adding ``sequence_lengths`` only
    with ``return_length=True``; fluidlite always returned the triple."""
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        enc = fluid.data("enc", [-1, 8], "float32")
        pair = L.dynamic_decode(_beam_decoder(L), inits=enc, max_step_num=3)
        triple = L.dynamic_decode(_beam_decoder(L), inits=enc, max_step_num=3,
                                  return_length=True)
    assert len(pair) == 2 and len(triple) == 3
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ids, again, lengths = exe.run(main, feed={"enc": np.ones((2, 8), "float32")},
                                  fetch_list=[pair[0], triple[0], triple[2]])
    # [batch, steps, beam] ids from both; the lengths [batch, beam] int64, at most 4 steps
    assert ids.shape[0] == 2 and ids.shape[2] == 3 and again.shape[::2] == ids.shape[::2]
    assert lengths.shape == (2, 3) and lengths.dtype == np.int64 and lengths.max() <= 4


def test_tile_beam_merge_with_batch_with_an_unknown_time_dim():
    """PaddleNLP/seq2seq's attention decoder tiles its encoder output ``[batch, time, hidden]``
    (time unknown at build time) with ``BeamSearchDecoder.tile_beam_merge_with_batch``.
    fluid 1.8 moves batch and beam last and merges them with a copy-dims (0) reshape;
    fluidlite reshaped to ``[-1] + shape[2:]``, two -1s, which shape inference refused."""
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, -1, 2], "float32")
        tiled = L.BeamSearchDecoder.tile_beam_merge_with_batch(x, beam_size=3)
    assert tiled.shape[-1] == 2 and len(tiled.shape) == 3
    xs = np.arange(12, dtype="float32").reshape(2, 3, 2)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xs}, fetch_list=[tiled])
    np.testing.assert_array_equal(got, np.repeat(xs, 3, axis=0))


def test_while_loop_carries_nested_loop_vars():
    """PaddleNLP/machine_translation/transformer's ``fast_decode`` loops over
    ``[step_idx, ids, scores, gather_idx, caches, bias]`` where ``caches`` is a list of dicts
    of Variables. fluid 1.8's ``while_loop`` takes nested structures (``map_structure(assign,
    output_vars, loop_vars)``); fluidlite refused ``loop_vars[4]`` ('must be a Variable')."""
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = L.fill_constant([1], "int64", 0)
        limit = L.fill_constant([1], "int64", 4)
        caches = [{"k": L.fill_constant([2], "float32", 1.0),
                   "v": L.fill_constant([2], "float32", 0.0)}]

        def body(i, caches):
            new = [{"k": c["k"] * 2.0, "v": c["v"] + c["k"]} for c in caches]
            return [i + 1, new]
        i_out, caches_out = L.while_loop(lambda i, caches: i < limit, body, [i, caches])
    assert isinstance(caches_out, list) and sorted(caches_out[0]) == ["k", "v"]
    exe = fluid.Executor(fluid.CPUPlace())
    got_i, k, v = exe.run(main, fetch_list=[i_out, caches_out[0]["k"], caches_out[0]["v"]])
    assert int(got_i[0]) == 4
    np.testing.assert_array_equal(k, [16.0, 16.0])       # 1 doubled four times
    np.testing.assert_array_equal(v, [15.0, 15.0])       # 1 + 2 + 4 + 8


def test_lod_reset_takes_every_level_of_y():
    """The transformer's fast_decode: ``accu_scores = lod_reset(accu_scores, pre_ids)`` where
    pre_ids (beam_search's selected_ids) has a 2-level LoD [sources -> prefixes, prefixes ->
    candidates], and beam_search then reads the source level. fluid 1.8's kernel gives Out
    Y's whole LoD (``out->set_lod(y_lod)``) and Y's level count; fluidlite kept only Y's
    last level, so beam_search saw one 'source' per prefix."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 1], "float32")
        y = fluid.data("y", [-1, 1], "int64", lod_level=2)
        out = fluid.layers.lod_reset(x, y)
    assert out.lod_level == 2
    y_val = fluid.create_lod_tensor(np.zeros((5, 1), "int64"), [[2, 1], [1, 3, 1]],
                                    fluid.CPUPlace())
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.arange(5, dtype="float32").reshape(5, 1), "y": y_val},
        fetch_list=[out], return_numpy=False)
    assert got.recursive_sequence_lengths() == [[2, 1], [1, 3, 1]]
    np.testing.assert_array_equal(np.array(got).ravel(), np.arange(5, dtype="float32"))


def test_linear_chain_crf_grad_reads_what_paddle_grad_maker_passes():
    """PaddleNLP/lexical_analysis: Paddle 2.6 running fluidlite's saved training program
    failed with "No Input(EmissionExps) found for LinearChainCRFGrad operator". fluid 1.8's
    LinearChainCRFGradMaker gives linear_chain_crf_grad the forward's Alpha, EmissionExps and
    TransitionExps besides Emission, Transition, Label (and Length); fluidlite passed only
    the forward inputs. The gradient itself is unchanged."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        emission = fluid.data("emission", [-1, 4], "float32", lod_level=1)
        emission.stop_gradient = False
        label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        cost = fluid.layers.linear_chain_crf(emission, label,
                                             param_attr=fluid.ParamAttr(name="crfw"))
        loss = fluid.layers.mean(cost)
        fluid.backward.append_backward(loss)
    grad = next(op for op in main.global_block().ops if op.type == "linear_chain_crf_grad")
    fwd = next(op for op in main.global_block().ops if op.type == "linear_chain_crf")
    for slot in ("Alpha", "EmissionExps", "TransitionExps"):
        assert grad.input(slot) == fwd.output(slot), slot
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.RandomState(3)
    feed = {"emission": _lod(rng.rand(5, 4).astype("float32"), [2, 3]),
            "label": _lod(rng.randint(0, 4, (5, 1)).astype("int64"), [2, 3])}
    (d_emission,) = exe.run(main, feed=feed, fetch_list=[emission.name + "@GRAD"])
    assert d_emission.shape == (5, 4) and np.isfinite(d_emission).all()

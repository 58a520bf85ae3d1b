# The recurrent models' state and layers (survey, paper 002, sec. 2.2-2.3), inline, for the
# recurrent kernel (rnn_kernels.pyx): the network's arrays and buffers (Rnn, Layer, Slot,
# Regularisers)
# and one RNN or LSTM layer's forward pass over a segment of T steps of B streams and its
# back-propagation through time. The output layers and the training step are the kernel's.
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from class_output cimport Classes
from hs_output cimport Tree
from elementwise cimport Adam, act, column_sums, logistic, lstm_cells, lstm_cells_backward, slope, tanh_into
from feedforward cimport activate, activation_slope
from kernel_common cimport gemm

cdef enum:
    MAX_LAYERS = 8
    MAX_SLOTS = 4 * MAX_LAYERS + 7


cdef struct Slot:
    float *param      # a parameter array stepped whole (all but C's rows, unless tied)
    float *grad
    float *m          # Adam's moments (NULL with SGD)
    float *v
    Py_ssize_t size
    bint decayed      # the weights' bulk decay applies (its role, from the trainer's Steps)
    bint frozen       # not stepped (its role, from the trainer's Steps)


cdef struct Regularisers:
    # AWD-LSTM's settings as the kernel receives them (nplmtk.neural.regularisation.Regularisers)
    float dropout_input, dropout_hidden, dropout_output, dropout_embedding, weight_drop, ar, tar
    bint locked       # the dropouts' masks one per stream and segment, not one per step


cdef struct Layer:
    int inputs, hidden, gates   # gates: 1 (RNN) or 4 (LSTM: i, f, o, g)
    float *U
    float *W
    float *b          # NULL without biases
    float *P          # LSTM peepholes (3 x h: i, f, o) or NULL
    float *gU
    float *gW
    float *gb
    float *gP
    float *S          # (T + 1) x B x h: the states, block 0 the carried one
    float *cell       # (T + 1) x B x h (LSTM)
    float *Sp         # T x B x h: the previous state as each step saw it (0 after a reset)
    float *Cp         # T x B x h (LSTM)
    float *Z          # T x B x gates h: the LSTM's gate values
    float *out        # T x B x h: the output after dropout, the next layer's input
    float *mask       # T x B x h: dropout's scale (0 or 1 / (1 - p))
    float drop        # the dropout probability of the output (between layers, or the last one's)
    float *Wf         # the W of this segment's steps: W, or Wd under weight drop
    float *Wd         # gates h x h: W times Wmask (weight drop, Merity et al. 2018, sec. 2)
    float *Wmask      # gates h x h: weight drop's scale (0 or 1 / (1 - p)), one per segment


cdef struct Mixture:
    # the mixture of softmaxes (Yang et al. 2018) over the top layer's output h: K components
    # (count 0: none), prior pi = softmax(Wp h), contexts h_k = tanh(Wk_k h + bk_k); mixture_output.pxi
    int count
    float drop        # dropout on the contexts (given; 0 while not regularised)
    float given_drop
    float *Wp         # K x w
    float *Wk         # K w x w
    float *bk         # K w
    float *gWp
    float *gWk
    float *gbk
    float *prior      # N x K: the prior's scores, then pi, then dL/d(scores)
    float *resp       # N x K: each component's posterior given the target
    float *A          # N x K w: the contexts, tanh's output
    float *H          # N x K w: after dropout (A itself without)
    float *mask       # N x K w
    float *Y          # N K x |V| (full) or N K x classes: the components' scores, then probabilities
    float *U          # N K x largest class (class output)
    float *dH         # N K x w
    int *targets      # N K: each row's target, once per component
    double *logp      # N K: log p of the target under each component


cdef struct Rnn:
    int vocab, m, layers, streams, capacity, lstm, activation, bias, direct, tied, reset, bos
    float drop_input  # dropout on the input features (the layers' on their outputs: Layer.drop)
    bint locked       # one mask per stream and segment, the same at every step (variational dropout)
    float drop_words  # embedding dropout: whole rows of C, per segment (Merity et al. 2018, sec. 4.2)
    float drop_weight # weight drop on each layer's W (DropConnect)
    float ar          # activation regularisation: ar / h ||dropped output||^2 per step (sec. 4.3)
    float tar         # temporal activation regularisation: tar / h ||s_t - s_t-1||^2
    float *word_scale # |V|: embedding dropout's scale of each word's row (0 or 1 / (1 - p))
    float clip        # this chunk's cap on the gradient's norm per word (0: none), from the trainer
    float *C
    float *V          # the output weights (C when tied)
    float *d
    float *M
    float *gC
    float *gV
    float *gd
    float *gM
    Mixture mos       # the mixture of softmaxes (mos.count 0: one softmax)
    Classes classes   # the class-factored output layer (classes.count 0: the full softmax)
    float *Vc         # its class rows (K x h) and biases
    float *bc
    float *gVc
    float *gbc
    float *U          # T x B x largest class: probabilities within each row's target class
    Tree tree         # the hierarchical softmax (tree.nodes 0: none): its node rows and biases
    float *Vn
    float *bn
    float *gVn
    float *gbn
    float *G          # T x B x the longest path: dL/dz at each node of each row's path
    float *X          # T x B x m: the input features after dropout
    const float *projected  # T x B x layer 0's gates x h: its pre-activations from the inputs, given (NULL: computed)
    float *Xmask
    float *Y          # T x B x |V|: scores, then probabilities, then dL/dy
    float *keep       # T x B: 0 where the step's input is <s> and the state resets
    float *dOut       # T x B x max(h, m)
    float *dX         # T x B x m
    float *dZ         # T x B x 4h
    float *dS         # B x h: dL/ds_t-1 carried back
    float *dC         # B x h
    int *inputs
    int *targets
    int *touched      # the distinct input words of a segment
    char *seen
    unsigned long long *rng
    Layer layer[MAX_LAYERS]
    Slot slot[MAX_SLOTS]
    int slots
    bint adam
    Adam settings     # Adam's numbers, given when the network is built (from the trainer's Optimizer)
    float *mC         # Adam's moments of the rows of C (untied)
    float *vC
    double *adam_step
    long long skipped # updates skipped: their gradient was not finite (step)


cdef inline void layer_forward(Rnn *net, Layer *L, const float *input, int T) noexcept nogil:
    cdef int B = net.streams, h = L.hidden, G = L.gates * h, t, r, j
    cdef Py_ssize_t N = <Py_ssize_t> T * B
    cdef float *z
    cdef float *Sp
    cdef float *Cp
    cdef float *s
    cdef float *c
    cdef float k, cp, gi, gf, go, gg
    cdef float *pre = L.Z if net.lstm else L.S + B * h  # the pre-activations of every step
    if L == &net.layer[0] and net.projected != NULL:
        memcpy(pre, net.projected, N * G * sizeof(float))
    else:
        for r in range(N):
            if L.b != NULL:
                memcpy(pre + r * G, L.b, G * sizeof(float))
            else:
                memset(pre + r * G, 0, G * sizeof(float))
        gemm(b'N', b'T', <int> N, G, L.inputs, 1.0, input, L.inputs, L.U, L.inputs, 1.0, pre, G)
    for t in range(T):
        Sp = L.Sp + t * B * h
        for r in range(B):
            k = net.keep[t * B + r]
            for j in range(h):
                Sp[r * h + j] = k * L.S[(t * B + r) * h + j]
                if net.lstm:
                    L.Cp[(t * B + r) * h + j] = k * L.cell[(t * B + r) * h + j]
        z = pre + t * B * G
        gemm(b'N', b'T', B, G, h, 1.0, Sp, h, L.Wf, h, 1.0, z, G)
        if not net.lstm:
            activate(z, B * h, net.activation)
            continue
        Cp = L.Cp + t * B * h
        s = L.S + (t + 1) * B * h
        c = L.cell + (t + 1) * B * h
        if net.activation == 0:  # tanh: the vectorised cells
            lstm_cells(z, Cp, L.P, c, s, B, h)
            continue
        for r in range(B):
            for j in range(h):
                cp = Cp[r * h + j]
                gi, gf, go, gg = z[r * G + j], z[r * G + h + j], z[r * G + 2 * h + j], z[r * G + 3 * h + j]
                if L.P != NULL:
                    gi += L.P[j] * cp
                    gf += L.P[h + j] * cp
                    go += L.P[2 * h + j] * cp
                gi, gf, go, gg = logistic(gi), logistic(gf), logistic(go), act(gg, net.activation)
                z[r * G + j], z[r * G + h + j], z[r * G + 2 * h + j], z[r * G + 3 * h + j] = gi, gf, go, gg
                c[r * h + j] = gf * cp + gi * gg
                s[r * h + j] = go * act(c[r * h + j], net.activation)


cdef inline void layer_backward(Rnn *net, Layer *L, const float *input, int T) noexcept nogil:
    """From dL/d(output) of every step in net.dOut: back through time (from the segment's
    end, nothing carried in), the gradients of U, W, b, P, and dL/d(input) in net.dOut."""
    cdef int B = net.streams, h = L.hidden, G = L.gates * h, t, r, j
    cdef Py_ssize_t N = <Py_ssize_t> T * B, i
    cdef float *ds
    cdef float *dz
    cdef float *z
    cdef float gi, gf, go, gg, cp, ac, dc, dcp, di, df, do, dg
    cdef float *tanh_cell = NULL  # tanh of the step's cells, computed at once
    if net.lstm and net.activation == 0:
        tanh_cell = <float *> malloc(B * h * sizeof(float))
    memset(net.dS, 0, B * h * sizeof(float))
    memset(net.dC, 0, B * h * sizeof(float))
    if L.gP != NULL:
        memset(L.gP, 0, 3 * h * sizeof(float))
    for t in range(T - 1, -1, -1):
        ds = net.dOut + t * B * h
        dz = net.dZ + t * B * G
        for i in range(B * h):
            ds[i] += net.dS[i]
        if not net.lstm:
            memcpy(dz, ds, B * h * sizeof(float))
            activation_slope(dz, L.S + (t + 1) * B * h, B * h, net.activation)
        else:
            z = L.Z + t * B * G
            if tanh_cell != NULL:  # tanh: the vectorised cells
                tanh_into(tanh_cell, L.cell + (t + 1) * B * h, B * h)
                lstm_cells_backward(z, L.Cp + t * B * h, tanh_cell, ds, net.dC, net.keep + t * B, L.P, L.gP, dz, B,
                                    h)
            else:  # another activation: the scalar loop
                for r in range(B):
                    for j in range(h):
                        gi, gf, go, gg = z[r * G + j], z[r * G + h + j], z[r * G + 2 * h + j], z[r * G + 3 * h + j]
                        cp = L.Cp[(t * B + r) * h + j]
                        ac = act(L.cell[((t + 1) * B + r) * h + j], net.activation)
                        dc = net.dC[r * h + j] + ds[r * h + j] * go * slope(ac, net.activation)
                        do = ds[r * h + j] * ac
                        di, df = dc * gg * gi * (1 - gi), dc * cp * gf * (1 - gf)
                        dg = dc * gi * slope(gg, net.activation)
                        do = do * go * (1 - go)
                        dz[r * G + j], dz[r * G + h + j], dz[r * G + 2 * h + j], dz[r * G + 3 * h + j] = di, df, do, dg
                        dcp = dc * gf
                        if L.P != NULL:
                            dcp += L.P[j] * di + L.P[h + j] * df + L.P[2 * h + j] * do
                            L.gP[j] += di * cp
                            L.gP[h + j] += df * cp
                            L.gP[2 * h + j] += do * cp
                        net.dC[r * h + j] = net.keep[t * B + r] * dcp
        gemm(b'N', b'N', B, h, G, 1.0, dz, G, L.Wf, h, 0.0, net.dS, h)
        for r in range(B):
            if net.keep[t * B + r] == 0:
                memset(net.dS + r * h, 0, h * sizeof(float))
    free(tanh_cell)
    gemm(b'T', b'N', G, h, <int> N, 1.0, net.dZ, G, L.Sp, h, 0.0, L.gW, h)
    gemm(b'T', b'N', G, L.inputs, <int> N, 1.0, net.dZ, G, input, L.inputs, 0.0, L.gU, L.inputs)
    if L.gb != NULL:
        column_sums(net.dZ, N, G, L.gb)
    gemm(b'N', b'N', <int> N, L.inputs, G, 1.0, net.dZ, G, L.U, L.inputs, 0.0, net.dOut, L.inputs)

package ollama

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// The tiny model's shape: a llama architecture small enough to load in a
// fraction of a second on a CPU (about 430 KB of F32 weights).
const (
	tinyHidden  = 64
	tinyHeads   = 4
	tinyKVHeads = 4
	tinyHeadDim = tinyHidden / tinyHeads
	tinyLayers  = 2
	tinyInter   = 128
	// TinyTrainedContext is the model's max_position_embeddings, which
	// Ollama reports as model_info's "llama.context_length" — the trained
	// length, not the num_ctx it runs with.
	TinyTrainedContext = 32768
	// maxMergedTokens bounds the vocabulary grown from tinyWords.
	maxMergedTokens = 900
)

// Special tokens of the tiny model's ChatML-style template.
const (
	tokEndOfText = "<|endoftext|>"
	tokIMStart   = "<|im_start|>"
	tokIMEnd     = "<|im_end|>"
)

// tinyWords become whole tokens, so that random output reads as words
// more often than as byte soup.
var tinyWords = strings.Fields(`the and to of a in is it you that he was for on are with as his they be at one have this from
or had by hot word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing see him
two has look more day could go come did number sound no most people my over know water than call first who
may down side been now find any new work part take get place made live where after back little only round
man year came show every good me give our under name very through just form sentence great think say help
low line differ turn cause much mean before move right boy old too same tell does set three want air well
also play small end put home read hand port large spell add even land here must big high such follow act
why ask men change went light kind off need house picture try us again animal point mother world near build
self earth father server chat team matrix dendrite homeserver markdown source urls json`)

// WriteTinyModel writes a llama-architecture model with random weights
// into dir, in the Hugging Face layout Ollama's converter imports
// (`FROM dir` in a Modelfile): config.json, generation_config.json,
// tokenizer.json (a byte-level BPE vocabulary of the 256 byte tokens, a
// few hundred merges and three special tokens), tokenizer_config.json and
// model.safetensors (F32). The same seed writes the same bytes.
func WriteTinyModel(dir string, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ollama: tiny model: %w", err)
	}
	tok, vocab := tinyTokenizer()
	v := len(vocab)
	files := map[string]any{
		"tokenizer.json": tok,
		"tokenizer_config.json": map[string]any{"add_bos_token": false, "add_eos_token": false,
			"bos_token": tokEndOfText, "eos_token": tokIMEnd, "pad_token": tokEndOfText,
			"model_max_length": TinyTrainedContext, "tokenizer_class": "PreTrainedTokenizerFast"},
		"generation_config.json": map[string]any{"bos_token_id": vocab[tokEndOfText],
			"eos_token_id": []int{vocab[tokIMEnd], vocab[tokEndOfText]}},
		"config.json": map[string]any{"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
			"hidden_size": tinyHidden, "intermediate_size": tinyInter, "num_hidden_layers": tinyLayers,
			"num_attention_heads": tinyHeads, "num_key_value_heads": tinyKVHeads, "head_dim": tinyHeadDim,
			"max_position_embeddings": TinyTrainedContext, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
			"vocab_size": v, "tie_word_embeddings": false, "torch_dtype": "float32",
			"bos_token_id": vocab[tokEndOfText], "eos_token_id": vocab[tokIMEnd]},
	}
	for name, content := range files {
		data, err := json.Marshal(content)
		if err != nil {
			return fmt.Errorf("ollama: tiny model: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("ollama: tiny model: %w", err)
		}
	}
	return writeSafetensors(filepath.Join(dir, "model.safetensors"), tinyTensors(v), rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}

// tensor is one weight of the model: a name, a shape and the scale of its
// uniform random values (0: all ones, for the norms).
type tensor struct {
	name  string
	shape []int
	scale float64
}

func tinyTensors(vocab int) []tensor {
	ts := []tensor{{"model.embed_tokens.weight", []int{vocab, tinyHidden}, 1}}
	for i := range tinyLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			tensor{p + "input_layernorm.weight", []int{tinyHidden}, 0},
			tensor{p + "self_attn.q_proj.weight", []int{tinyHeads * tinyHeadDim, tinyHidden}, 0.1},
			tensor{p + "self_attn.k_proj.weight", []int{tinyKVHeads * tinyHeadDim, tinyHidden}, 0.1},
			tensor{p + "self_attn.v_proj.weight", []int{tinyKVHeads * tinyHeadDim, tinyHidden}, 0.1},
			tensor{p + "self_attn.o_proj.weight", []int{tinyHidden, tinyHeads * tinyHeadDim}, 0.1},
			tensor{p + "post_attention_layernorm.weight", []int{tinyHidden}, 0},
			tensor{p + "mlp.gate_proj.weight", []int{tinyInter, tinyHidden}, 0.1},
			tensor{p + "mlp.up_proj.weight", []int{tinyInter, tinyHidden}, 0.1},
			tensor{p + "mlp.down_proj.weight", []int{tinyHidden, tinyInter}, 0.1},
		)
	}
	return append(ts, tensor{"model.norm.weight", []int{tinyHidden}, 0}, tensor{"lm_head.weight", []int{vocab, tinyHidden}, 0.3})
}

// writeSafetensors writes ts in the safetensors format: an 8-byte
// little-endian header length, a JSON header (name → dtype, shape, data
// offsets), padded with spaces to 8 bytes, then the raw little-endian data.
func writeSafetensors(path string, ts []tensor, rng *rand.Rand) error {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, t := range ts {
		n := 1
		for _, d := range t.shape {
			n *= d
		}
		start := len(data)
		for range n {
			v := float32(1)
			if t.scale != 0 {
				v = float32((rng.Float64()*2 - 1) * t.scale)
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		header[t.name] = map[string]any{"dtype": "F32", "shape": t.shape, "data_offsets": []int{start, len(data)}}
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("ollama: tiny model: %w", err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("ollama: tiny model: %w", err)
	}
	return nil
}

// byteLevelAlphabet is GPT-2's byte-to-character table of byte-level BPE:
// printable bytes stand for themselves, the others are moved to 256 and
// up. It returns the bytes in vocabulary order and their characters.
func byteLevelAlphabet() ([]byte, []string) {
	var bs []byte
	var cs []rune
	for _, r := range [][2]int{{'!', '~'}, {0xA1, 0xAC}, {0xAE, 0xFF}} {
		for b := r[0]; b <= r[1]; b++ {
			bs, cs = append(bs, byte(b)), append(cs, rune(b))
		}
	}
	printable := map[byte]bool{}
	for _, b := range bs {
		printable[b] = true
	}
	n := 0
	for b := range 256 {
		if !printable[byte(b)] {
			bs, cs = append(bs, byte(b)), append(cs, rune(256+n))
			n++
		}
	}
	chars := make([]string, len(cs))
	for i, c := range cs {
		chars[i] = string(c)
	}
	return bs, chars
}

// tinyTokenizer returns tokenizer.json's content and the vocabulary: the
// 256 byte tokens, tokens grown from tinyWords by merges (each merge "a b"
// has a, b and ab in the vocabulary) and the special tokens.
func tinyTokenizer() (map[string]any, map[string]int) {
	bs, chars := byteLevelAlphabet()
	enc := map[byte]string{}
	vocab := map[string]int{}
	for i, b := range bs {
		enc[b] = chars[i]
		vocab[chars[i]] = len(vocab)
	}
	encode := func(s string) []string {
		var out []string
		for _, b := range []byte(s) {
			out = append(out, enc[b])
		}
		return out
	}
	var targets [][]string
	for _, w := range tinyWords {
		targets = append(targets, encode(" "+w), encode(w))
	}
	for _, s := range []string{`{"`, `":`, `",`, `"]`, `["`, `"}`, " {", "\n\n", "  ", "##", "**"} {
		targets = append(targets, encode(s))
	}
	var merges []string
	for _, t := range targets {
		if _, ok := vocab[strings.Join(t, "")]; ok || len(vocab) >= maxMergedTokens {
			continue
		}
		cur := t[0]
		for _, p := range t[1:] {
			next := cur + p
			if _, ok := vocab[next]; !ok {
				vocab[next] = len(vocab)
				merges = append(merges, cur+" "+p)
			}
			cur = next
		}
	}
	var added []map[string]any
	for _, s := range []string{tokEndOfText, tokIMStart, tokIMEnd} {
		added = append(added, map[string]any{"id": len(vocab), "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
		vocab[s] = len(vocab)
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": byteLevel, "post_processor": nil, "decoder": byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
	}, vocab
}

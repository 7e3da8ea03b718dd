package config

import "path/filepath"

// AdminSocketName is the file name of the admin socket inside
// runtime.data_dir when runtime.admin_socket is left empty.
const AdminSocketName = "admin.sock"

// Default returns a configuration with a sensible value for every limit,
// timeout and message. It leaves empty what only the operator can know:
// the homeserver, account, rooms, LLM endpoint and model, persona file,
// data directory and secrets. Default().Validate() therefore fails until
// those are filled in.
func Default() Config {
	return Config{
		Matrix: MatrixConfig{
			SyncTimeoutMS:        30_000,
			SyncTimelineLimit:    50,
			GapPageLimit:         10,
			LateStoreSeconds:     330,
			TxnIDsSurviveRestart: "auto",
		},
		LLM: LLMConfig{
			RequestTimeoutSeconds: 90,
			MaxOutputTokens:       1024,
			MaxRequestCharacters:  120_000,
			MaxResponseCharacters: 12_000,
			MaxIterations:         8,
			MaxToolCalls:          6,
			MaxParallelToolCalls:  4,
			TokenLimitParameter:   "max_tokens",
			ResponseFormat:        "json_schema",
			TextToolCalls:         TextToolCallsAuto,
			ContextWindowTokens:   8192,
		},
		Persona: PersonaConfig{
			GenericError:  "Oh dear, I lost my train of thought there. Could you ask me once more?",
			OverloadError: "That is more than I can work through right now. Could you try a smaller question?",
			BudgetError:   "I have talked myself hoarse for today. Ask me again tomorrow?",
			TimeZone:      "UTC",
		},
		Context: ContextConfig{
			MaxEvents:          40,
			MaxCharacters:      24_000,
			MaxEventCharacters: 4_000,
			MaxReplyDepth:      2,
			WindowStepEvents:   20,
		},
		Search: SearchConfig{
			MaxResults:     8,
			TimeoutSeconds: 15,
		},
		Web: WebConfig{
			ConnectTimeoutSeconds:   5,
			ReadTimeoutSeconds:      15,
			TotalTimeoutSeconds:     20,
			MaxRedirects:            5,
			MaxDownloadBytes:        2_000_000,
			MaxToolOutputCharacters: 30_000,
			MaxTotalArtifactBytes:   8_000_000,
			Converter:               ConverterPandoc,
			PandocTimeoutSeconds:    10,
			UserAgent:               "LisaBot/1.0 (Matrix chat bot)",
		},
		Runtime: RuntimeConfig{
			MaxConcurrentRooms:       3,
			InvocationTimeoutSeconds: 180,
			ShutdownGraceSeconds:     20,
			RoomQueueLimit:           20,
			SenderRateLimit:          6,
			SenderRateWindowSeconds:  60,
			WaitReaction:             "⏳",
			WaitReactionSeconds:      10,
			LogLevel:                 "info",
			TrailEvents:              200,
			RetentionDays:            DefaultRetentionDays,
		},
	}
}

// WithDefaults returns c with derived defaults filled in. It is pure: the
// only rule today is that an empty runtime.admin_socket becomes
// AdminSocketName inside runtime.data_dir (left empty if data_dir is empty
// too). Paths stay as written; [Resolve] makes relative ones absolute.
func (c Config) WithDefaults() Config {
	if c.Runtime.AdminSocket == "" && c.Runtime.DataDir != "" {
		c.Runtime.AdminSocket = filepath.Join(c.Runtime.DataDir, AdminSocketName)
	}
	return c
}

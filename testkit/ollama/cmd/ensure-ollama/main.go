package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/lisabot/lisa/testkit/ollama"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	began := time.Now()
	path, err := ollama.EnsureBinary(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ensure-ollama:", err)
		os.Exit(1)
	}
	log.Info("ollama ready", "path", path, "seconds", int(time.Since(began).Seconds()))
	fmt.Println(path)
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/lisabot/lisa/devkit/dendrite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	path, err := dendrite.EnsureBinary(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ensure-dendrite:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
